# Reference solution (generated).
set -e
echo 270 >> log.txt
