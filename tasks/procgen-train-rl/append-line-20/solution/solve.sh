# Reference solution (generated).
set -e
echo 721 >> log.txt
