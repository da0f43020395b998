# Reference solution (generated).
set -e
rm tmp_290.txt
