# Reference solution (generated).
set -e
echo 612 >> log.txt
