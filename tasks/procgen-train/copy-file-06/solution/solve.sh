# Reference solution (generated).
set -e
cp data_885.txt copy_885.txt
