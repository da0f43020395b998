# Reference solution (generated).
set -e
sed -i 's/746/270/g' notes.txt
