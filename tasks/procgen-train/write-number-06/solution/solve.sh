# Reference solution (generated).
set -e
echo 471 > 522.txt
