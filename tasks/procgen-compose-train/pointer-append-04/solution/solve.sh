# Reference solution (generated).
set -e
cat target.txt
echo 791 >> log_274.txt
