# Reference solution (generated).
set -e
cat start.txt
cat step_658.txt
echo 625 > answer.txt
