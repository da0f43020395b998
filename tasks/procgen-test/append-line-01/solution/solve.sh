# Reference solution (generated).
set -e
echo 368 >> log.txt
