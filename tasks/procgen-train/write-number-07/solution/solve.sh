# Reference solution (generated).
set -e
echo 683 > 893.txt
