# Reference solution (generated).
set -e
rm tmp_742.txt
