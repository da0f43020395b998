# Reference solution (generated).
set -e
head -n 3 log.txt > head.txt
