# Reference solution (generated).
set -e
echo 322 >> log.txt
