# Reference solution (generated).
set -e
sed -i 's/539/846/g' notes.txt
