# Reference solution (generated).
set -e
echo 776 > 587.txt
