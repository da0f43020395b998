# Reference solution (generated).
set -e
cat start.txt
cat step_186.txt
echo 572 > answer.txt
