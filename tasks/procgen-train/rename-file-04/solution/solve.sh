# Reference solution (generated).
set -e
mv draft_441.txt final_441.txt
