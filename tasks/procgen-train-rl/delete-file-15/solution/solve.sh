# Reference solution (generated).
set -e
rm tmp_180.txt
