# Reference solution (generated).
set -e
cp data_411.txt copy_411.txt
