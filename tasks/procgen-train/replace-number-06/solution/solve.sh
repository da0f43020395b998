# Reference solution (generated).
set -e
sed -i 's/186/979/g' notes.txt
