# Reference solution (generated).
set -e
echo 864 >> log.txt
