# Reference solution (generated).
set -e
echo 193 >> log.txt
