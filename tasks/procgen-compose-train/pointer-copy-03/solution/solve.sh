# Reference solution (generated).
set -e
cat source.txt
cp data_349.txt backup.txt
