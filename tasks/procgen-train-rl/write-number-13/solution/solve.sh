# Reference solution (generated).
set -e
echo 302 > 815.txt
