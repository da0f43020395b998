# Reference solution (generated).
set -e
rm tmp_451.txt
