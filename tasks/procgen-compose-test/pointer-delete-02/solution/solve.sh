# Reference solution (generated).
set -e
cat target.txt
rm tmp_158.txt
