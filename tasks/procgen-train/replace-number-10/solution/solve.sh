# Reference solution (generated).
set -e
sed -i 's/937/547/g' notes.txt
