# Reference solution (generated).
set -e
cat code.txt
echo found > 839.txt
