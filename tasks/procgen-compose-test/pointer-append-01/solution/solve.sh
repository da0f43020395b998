# Reference solution (generated).
set -e
cat target.txt
echo 519 >> log_348.txt
