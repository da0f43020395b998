# Reference solution (generated).
set -e
cat start.txt
cat next_393.txt
rm tmp_126.txt
