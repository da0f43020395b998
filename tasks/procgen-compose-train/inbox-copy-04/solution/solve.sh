# Reference solution (generated).
set -e
ls drop
cp drop/item_765.txt copy.txt
