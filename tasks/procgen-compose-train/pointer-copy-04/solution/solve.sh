# Reference solution (generated).
set -e
cat source.txt
cp data_935.txt backup.txt
