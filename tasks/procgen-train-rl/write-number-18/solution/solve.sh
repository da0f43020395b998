# Reference solution (generated).
set -e
echo 707 > 341.txt
