# Reference solution (generated).
set -e
cat start.txt
cat next_448.txt
rm tmp_476.txt
