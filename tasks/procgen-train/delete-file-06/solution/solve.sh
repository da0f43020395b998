# Reference solution (generated).
set -e
rm tmp_400.txt
