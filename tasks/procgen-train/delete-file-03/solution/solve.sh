# Reference solution (generated).
set -e
rm tmp_233.txt
