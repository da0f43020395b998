# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 718 >> log_719.txt
