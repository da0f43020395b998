# Reference solution (generated).
set -e
cp data_431.txt copy_431.txt
