# Reference solution (generated).
set -e
echo 327 > 314.txt
