# Reference solution (generated).
set -e
sed -i 's/719/666/g' notes.txt
