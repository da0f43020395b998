# Reference solution (generated).
set -e
cat old.txt
mv draft_498.txt final.txt
