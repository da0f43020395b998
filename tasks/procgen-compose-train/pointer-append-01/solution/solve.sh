# Reference solution (generated).
set -e
cat target.txt
echo 784 >> log_180.txt
