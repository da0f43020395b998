# Reference solution (generated).
set -e
mv draft_825.txt final_825.txt
