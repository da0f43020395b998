# Reference solution (generated).
set -e
mv draft_755.txt final_755.txt
