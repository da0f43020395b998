# Reference solution (generated).
set -e
cp data_211.txt copy_211.txt
