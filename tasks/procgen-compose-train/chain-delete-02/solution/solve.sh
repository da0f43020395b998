# Reference solution (generated).
set -e
cat start.txt
cat next_813.txt
rm tmp_361.txt
