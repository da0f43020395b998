# Reference solution (generated).
set -e
cat code.txt
echo found > 671.txt
