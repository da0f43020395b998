# Reference solution (generated).
set -e
cat old.txt
mv draft_359.txt final.txt
