# Reference solution (generated).
set -e
echo 533 >> log.txt
