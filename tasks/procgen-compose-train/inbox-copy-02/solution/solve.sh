# Reference solution (generated).
set -e
ls drop
cp drop/item_117.txt copy.txt
