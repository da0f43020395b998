# Reference solution (generated).
set -e
sed -i 's/212/167/g' notes.txt
