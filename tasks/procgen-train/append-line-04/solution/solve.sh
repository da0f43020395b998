# Reference solution (generated).
set -e
echo 822 >> log.txt
