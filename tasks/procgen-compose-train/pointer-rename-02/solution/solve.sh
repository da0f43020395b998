# Reference solution (generated).
set -e
cat old.txt
mv draft_925.txt final.txt
