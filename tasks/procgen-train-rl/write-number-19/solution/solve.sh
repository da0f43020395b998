# Reference solution (generated).
set -e
echo 477 > 412.txt
