# Reference solution (generated).
set -e
mv draft_968.txt final_968.txt
