# Reference solution (generated).
set -e
cat source.txt
cp data_782.txt backup.txt
