# Reference solution (generated).
set -e
wc -l items.txt
echo counted > 31.txt
