# Reference solution (generated).
set -e
sed -i 's/616/159/g' notes.txt
