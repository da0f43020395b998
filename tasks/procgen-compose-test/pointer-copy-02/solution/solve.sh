# Reference solution (generated).
set -e
cat source.txt
cp data_244.txt backup.txt
