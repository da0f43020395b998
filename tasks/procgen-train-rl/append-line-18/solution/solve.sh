# Reference solution (generated).
set -e
echo 588 >> log.txt
