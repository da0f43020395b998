# Reference solution (generated).
set -e
ls trash
rm trash/old_214.txt
