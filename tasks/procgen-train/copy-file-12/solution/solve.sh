# Reference solution (generated).
set -e
cp data_324.txt copy_324.txt
