# Reference solution (generated).
set -e
sed -i 's/529/765/g' notes.txt
