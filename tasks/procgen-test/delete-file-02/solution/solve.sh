# Reference solution (generated).
set -e
rm tmp_942.txt
