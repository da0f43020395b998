# Reference solution (generated).
set -e
echo 267 > 163.txt
