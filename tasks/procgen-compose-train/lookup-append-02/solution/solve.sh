# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 144 >> log_858.txt
