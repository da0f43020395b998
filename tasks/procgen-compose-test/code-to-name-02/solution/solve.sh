# Reference solution (generated).
set -e
cat code.txt
echo found > 918.txt
