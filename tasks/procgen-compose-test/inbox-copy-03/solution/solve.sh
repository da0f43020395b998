# Reference solution (generated).
set -e
ls drop
cp drop/item_788.txt copy.txt
