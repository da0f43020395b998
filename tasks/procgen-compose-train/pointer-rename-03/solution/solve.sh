# Reference solution (generated).
set -e
cat old.txt
mv draft_460.txt final.txt
