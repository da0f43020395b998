# Reference solution (generated).
set -e
sed -i 's/921/736/g' notes.txt
