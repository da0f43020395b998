# Reference solution (generated).
set -e
ls drop
cp drop/item_387.txt copy.txt
