# Reference solution (generated).
set -e
mv draft_986.txt final_986.txt
