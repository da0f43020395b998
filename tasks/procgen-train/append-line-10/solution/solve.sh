# Reference solution (generated).
set -e
echo 656 >> log.txt
