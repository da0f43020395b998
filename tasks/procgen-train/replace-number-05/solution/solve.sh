# Reference solution (generated).
set -e
sed -i 's/488/170/g' notes.txt
