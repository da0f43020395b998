# Reference solution (generated).
set -e
cat start.txt
cat step_594.txt
echo 171 > answer.txt
