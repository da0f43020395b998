# Reference solution (generated).
set -e
cp data_124.txt copy_124.txt
