# Reference solution (generated).
set -e
cat start.txt
cat step_642.txt
echo 481 > answer.txt
