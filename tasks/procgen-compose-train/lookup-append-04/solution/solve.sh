# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 262 >> log_448.txt
