# Reference solution (generated).
set -e
head -n 7 log.txt > head.txt
