# Reference solution (generated).
set -e
mv draft_876.txt final_876.txt
