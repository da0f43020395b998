# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 847 >> log_731.txt
