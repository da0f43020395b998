# Reference solution (generated).
set -e
cat start.txt
cat next_616.txt
rm tmp_210.txt
