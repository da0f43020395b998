# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 822 >> log_656.txt
