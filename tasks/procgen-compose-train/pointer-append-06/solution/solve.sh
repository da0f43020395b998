# Reference solution (generated).
set -e
cat target.txt
echo 386 >> log_591.txt
