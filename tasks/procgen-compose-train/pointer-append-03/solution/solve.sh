# Reference solution (generated).
set -e
cat target.txt
echo 217 >> log_907.txt
