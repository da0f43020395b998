# Reference solution (generated).
set -e
ls trash
rm trash/old_864.txt
