# Reference solution (generated).
set -e
rm tmp_214.txt
