# Reference solution (generated).
set -e
ls drop
cp drop/item_384.txt copy.txt
