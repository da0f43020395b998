# Reference solution (generated).
set -e
cat start.txt
cat next_764.txt
rm tmp_524.txt
