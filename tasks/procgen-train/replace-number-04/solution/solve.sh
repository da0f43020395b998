# Reference solution (generated).
set -e
sed -i 's/165/492/g' notes.txt
