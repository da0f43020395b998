# Reference solution (generated).
set -e
sed -i 's/113/388/g' notes.txt
