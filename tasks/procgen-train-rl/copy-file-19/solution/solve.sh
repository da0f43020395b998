# Reference solution (generated).
set -e
cp data_713.txt copy_713.txt
