# Reference solution (generated).
set -e
cat code.txt
echo found > 641.txt
