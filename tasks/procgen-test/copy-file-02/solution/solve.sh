# Reference solution (generated).
set -e
cp data_952.txt copy_952.txt
