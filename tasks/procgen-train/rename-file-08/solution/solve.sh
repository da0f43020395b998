# Reference solution (generated).
set -e
mv draft_486.txt final_486.txt
