# Reference solution (generated).
set -e
cat code.txt
echo found > 864.txt
