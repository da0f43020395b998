# Reference solution (generated).
set -e
sed -i 's/632/194/g' notes.txt
