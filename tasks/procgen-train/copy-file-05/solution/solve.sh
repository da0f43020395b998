# Reference solution (generated).
set -e
cp data_349.txt copy_349.txt
