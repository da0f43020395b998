# Reference solution (generated).
set -e
echo 552 >> log.txt
