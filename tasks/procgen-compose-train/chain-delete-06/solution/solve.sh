# Reference solution (generated).
set -e
cat start.txt
cat next_972.txt
rm tmp_971.txt
