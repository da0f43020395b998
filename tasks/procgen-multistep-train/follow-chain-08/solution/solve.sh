# Reference solution (generated).
set -e
cat start.txt
cat step_688.txt
echo 196 > answer.txt
