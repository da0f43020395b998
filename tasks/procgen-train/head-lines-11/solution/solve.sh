# Reference solution (generated).
set -e
head -n 4 log.txt > head.txt
