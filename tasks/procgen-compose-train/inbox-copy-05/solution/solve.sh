# Reference solution (generated).
set -e
ls drop
cp drop/item_250.txt copy.txt
