# Reference solution (generated).
set -e
sed -i 's/991/582/g' notes.txt
