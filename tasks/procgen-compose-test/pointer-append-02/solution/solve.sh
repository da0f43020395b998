# Reference solution (generated).
set -e
cat target.txt
echo 671 >> log_746.txt
