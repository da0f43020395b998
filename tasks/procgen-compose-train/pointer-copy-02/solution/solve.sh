# Reference solution (generated).
set -e
cat source.txt
cp data_437.txt backup.txt
