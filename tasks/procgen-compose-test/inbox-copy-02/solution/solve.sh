# Reference solution (generated).
set -e
ls drop
cp drop/item_525.txt copy.txt
