# Reference solution (generated).
set -e
cp data_530.txt copy_530.txt
