# Reference solution (generated).
set -e
cat target.txt
rm tmp_814.txt
