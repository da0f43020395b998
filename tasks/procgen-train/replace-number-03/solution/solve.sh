# Reference solution (generated).
set -e
sed -i 's/149/689/g' notes.txt
