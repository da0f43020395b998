# Reference solution (generated).
set -e
sed -i 's/185/629/g' notes.txt
