# Reference solution (generated).
set -e
cat old.txt
mv draft_328.txt final.txt
