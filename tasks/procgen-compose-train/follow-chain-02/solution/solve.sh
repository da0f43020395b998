# Reference solution (generated).
set -e
cat start.txt
cat step_935.txt
echo 826 > answer.txt
