# Reference solution (generated).
set -e
cat target.txt
rm tmp_890.txt
