# Reference solution (generated).
set -e
echo 758 > 981.txt
