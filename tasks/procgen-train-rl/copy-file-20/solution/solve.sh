# Reference solution (generated).
set -e
cp data_279.txt copy_279.txt
