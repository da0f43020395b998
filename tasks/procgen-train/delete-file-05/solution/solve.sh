# Reference solution (generated).
set -e
rm tmp_553.txt
