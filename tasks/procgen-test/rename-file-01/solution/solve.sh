# Reference solution (generated).
set -e
mv draft_880.txt final_880.txt
