# Reference solution (generated).
set -e
cp data_858.txt copy_858.txt
