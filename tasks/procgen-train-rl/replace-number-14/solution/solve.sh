# Reference solution (generated).
set -e
sed -i 's/675/774/g' notes.txt
