# Reference solution (generated).
set -e
head -n 11 log.txt > head.txt
