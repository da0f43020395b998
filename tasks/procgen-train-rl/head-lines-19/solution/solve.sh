# Reference solution (generated).
set -e
head -n 9 log.txt > head.txt
