# Reference solution (generated).
set -e
echo 304 > 310.txt
