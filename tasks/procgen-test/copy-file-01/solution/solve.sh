# Reference solution (generated).
set -e
cp data_751.txt copy_751.txt
