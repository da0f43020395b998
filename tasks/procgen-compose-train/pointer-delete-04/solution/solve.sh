# Reference solution (generated).
set -e
cat target.txt
rm tmp_368.txt
