# Reference solution (generated).
set -e
rm tmp_837.txt
