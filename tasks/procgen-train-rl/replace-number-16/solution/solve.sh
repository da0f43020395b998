# Reference solution (generated).
set -e
sed -i 's/687/563/g' notes.txt
