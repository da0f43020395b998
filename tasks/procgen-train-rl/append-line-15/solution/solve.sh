# Reference solution (generated).
set -e
echo 668 >> log.txt
