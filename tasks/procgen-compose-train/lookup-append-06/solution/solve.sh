# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 127 >> log_760.txt
