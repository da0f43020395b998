# Reference solution (generated).
set -e
rm tmp_179.txt
