# Reference solution (generated).
set -e
cat source.txt
cp data_163.txt backup.txt
