# Reference solution (generated).
set -e
cat code.txt
echo found > 226.txt
