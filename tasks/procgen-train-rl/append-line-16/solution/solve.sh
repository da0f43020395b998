# Reference solution (generated).
set -e
echo 979 >> log.txt
