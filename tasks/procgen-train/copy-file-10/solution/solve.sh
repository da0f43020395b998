# Reference solution (generated).
set -e
cp data_492.txt copy_492.txt
