# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 562 >> log_139.txt
