# Reference solution (generated).
set -e
cat start.txt
cat next_911.txt
rm tmp_660.txt
