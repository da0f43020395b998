# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 958 >> log_591.txt
