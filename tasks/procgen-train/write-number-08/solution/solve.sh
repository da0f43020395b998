# Reference solution (generated).
set -e
echo 448 > 194.txt
