# Reference solution (generated).
set -e
echo 398 > 959.txt
