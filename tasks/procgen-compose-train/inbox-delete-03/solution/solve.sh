# Reference solution (generated).
set -e
ls trash
rm trash/old_602.txt
