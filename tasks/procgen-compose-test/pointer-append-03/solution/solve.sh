# Reference solution (generated).
set -e
cat target.txt
echo 450 >> log_159.txt
