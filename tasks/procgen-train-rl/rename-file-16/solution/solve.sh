# Reference solution (generated).
set -e
mv draft_783.txt final_783.txt
