# Reference solution (generated).
set -e
head -n 2 log.txt > head.txt
