# Reference solution (generated).
set -e
cp data_310.txt copy_310.txt
