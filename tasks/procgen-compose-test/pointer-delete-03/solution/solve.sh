# Reference solution (generated).
set -e
cat target.txt
rm tmp_974.txt
