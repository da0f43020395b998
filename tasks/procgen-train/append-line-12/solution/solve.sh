# Reference solution (generated).
set -e
echo 338 >> log.txt
