# Reference solution (generated).
set -e
echo 620 >> log.txt
