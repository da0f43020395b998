# Reference solution (generated).
set -e
sed -i 's/703/726/g' notes.txt
