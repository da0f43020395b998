# Reference solution (generated).
set -e
cp data_844.txt copy_844.txt
