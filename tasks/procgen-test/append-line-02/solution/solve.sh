# Reference solution (generated).
set -e
echo 497 >> log.txt
