# Reference solution (generated).
set -e
cp data_889.txt copy_889.txt
