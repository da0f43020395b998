# Reference solution (generated).
set -e
cat target.txt
rm tmp_137.txt
