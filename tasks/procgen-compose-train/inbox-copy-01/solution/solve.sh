# Reference solution (generated).
set -e
ls drop
cp drop/item_757.txt copy.txt
