# Reference solution (generated).
set -e
echo 893 >> log.txt
