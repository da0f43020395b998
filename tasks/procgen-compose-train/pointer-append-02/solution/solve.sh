# Reference solution (generated).
set -e
cat target.txt
echo 964 >> log_967.txt
