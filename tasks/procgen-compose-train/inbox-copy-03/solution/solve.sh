# Reference solution (generated).
set -e
ls drop
cp drop/item_813.txt copy.txt
