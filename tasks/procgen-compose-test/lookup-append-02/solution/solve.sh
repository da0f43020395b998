# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 901 >> log_723.txt
