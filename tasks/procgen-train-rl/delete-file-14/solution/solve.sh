# Reference solution (generated).
set -e
rm tmp_285.txt
