# Reference solution (generated).
set -e
echo 110 >> log.txt
