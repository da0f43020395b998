# Reference solution (generated).
set -e
sort -n nums.txt > sorted.txt
