# Reference solution (generated).
set -e
cp data_232.txt copy_232.txt
