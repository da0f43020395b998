# Reference solution (generated).
set -e
cat source.txt
cp data_755.txt backup.txt
