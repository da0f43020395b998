# Reference solution (generated).
set -e
echo 712 > 135.txt
