# Reference solution (generated).
set -e
echo 505 >> log.txt
