# Reference solution (generated).
set -e
cat start.txt
cat next_761.txt
rm tmp_709.txt
