# Reference solution (generated).
set -e
cat old.txt
mv draft_754.txt final.txt
