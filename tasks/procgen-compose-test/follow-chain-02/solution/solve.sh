# Reference solution (generated).
set -e
cat start.txt
cat step_828.txt
echo 847 > answer.txt
