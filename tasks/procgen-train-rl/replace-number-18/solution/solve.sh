# Reference solution (generated).
set -e
sed -i 's/892/829/g' notes.txt
