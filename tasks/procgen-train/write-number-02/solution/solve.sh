# Reference solution (generated).
set -e
echo 238 > 208.txt
