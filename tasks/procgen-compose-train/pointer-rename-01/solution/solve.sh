# Reference solution (generated).
set -e
cat old.txt
mv draft_169.txt final.txt
