# Reference solution (generated).
set -e
rm tmp_893.txt
