# Reference solution (generated).
set -e
echo 806 > 760.txt
