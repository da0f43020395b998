# Reference solution (generated).
set -e
cp data_240.txt copy_240.txt
