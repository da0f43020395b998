# Reference solution (generated).
set -e
mv draft_405.txt final_405.txt
