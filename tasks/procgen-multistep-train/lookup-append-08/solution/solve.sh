# Reference solution (generated).
set -e
cat config.txt
cat value.txt
echo 387 >> log_744.txt
