# Reference solution (generated).
set -e
head -n 10 log.txt > head.txt
