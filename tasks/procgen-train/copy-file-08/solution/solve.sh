# Reference solution (generated).
set -e
cp data_659.txt copy_659.txt
