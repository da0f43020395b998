# Reference solution (generated).
set -e
echo 429 >> log.txt
