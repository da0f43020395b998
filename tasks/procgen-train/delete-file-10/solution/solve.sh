# Reference solution (generated).
set -e
rm tmp_801.txt
