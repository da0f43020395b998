# Reference solution (generated).
set -e
cat code.txt
echo found > 616.txt
