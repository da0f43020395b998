# Reference solution (generated).
set -e
rm tmp_598.txt
