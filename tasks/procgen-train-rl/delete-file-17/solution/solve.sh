# Reference solution (generated).
set -e
rm tmp_154.txt
