# Reference solution (generated).
set -e
cat start.txt
cat step_675.txt
echo 419 > answer.txt
