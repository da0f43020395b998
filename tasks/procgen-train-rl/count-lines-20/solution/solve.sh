# Reference solution (generated).
set -e
wc -l < items.txt > count.txt
