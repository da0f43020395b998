# Reference solution (generated).
set -e
rm tmp_901.txt
