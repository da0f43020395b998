# Reference solution (generated).
set -e
echo 403 > 321.txt
