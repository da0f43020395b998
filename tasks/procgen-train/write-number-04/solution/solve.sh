# Reference solution (generated).
set -e
echo 826 > 373.txt
