# Reference solution (generated).
set -e
mv draft_912.txt final_912.txt
