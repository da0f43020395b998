# Reference solution (generated).
set -e
cat target.txt
echo 954 >> log_249.txt
