# Reference solution (generated).
set -e
rm tmp_423.txt
