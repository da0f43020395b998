# Reference solution (generated).
set -e
cp data_325.txt copy_325.txt
