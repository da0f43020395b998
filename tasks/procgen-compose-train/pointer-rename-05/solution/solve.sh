# Reference solution (generated).
set -e
cat old.txt
mv draft_572.txt final.txt
