# Reference solution (generated).
set -e
ls trash
rm trash/old_339.txt
