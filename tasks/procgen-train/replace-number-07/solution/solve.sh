# Reference solution (generated).
set -e
sed -i 's/926/821/g' notes.txt
