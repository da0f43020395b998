# Reference solution (generated).
set -e
cp data_197.txt copy_197.txt
