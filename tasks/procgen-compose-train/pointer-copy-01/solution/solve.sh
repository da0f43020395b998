# Reference solution (generated).
set -e
cat source.txt
cp data_904.txt backup.txt
