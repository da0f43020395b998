# Reference solution (generated).
set -e
cat source.txt
cp data_956.txt backup.txt
