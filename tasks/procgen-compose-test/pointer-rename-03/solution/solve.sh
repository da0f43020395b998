# Reference solution (generated).
set -e
cat old.txt
mv draft_123.txt final.txt
