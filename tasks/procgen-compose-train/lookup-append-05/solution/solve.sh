# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 526 >> log_797.txt
