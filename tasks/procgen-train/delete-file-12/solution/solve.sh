# Reference solution (generated).
set -e
rm tmp_532.txt
