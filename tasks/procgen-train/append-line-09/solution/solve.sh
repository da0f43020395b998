# Reference solution (generated).
set -e
echo 573 >> log.txt
