# Reference solution (generated).
set -e
rm tmp_960.txt
