# Reference solution (generated).
set -e
echo 498 > 891.txt
