# Reference solution (generated).
set -e
echo 141 > 804.txt
