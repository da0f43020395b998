# Reference solution (generated).
set -e
cat start.txt
cat next_386.txt
rm tmp_205.txt
