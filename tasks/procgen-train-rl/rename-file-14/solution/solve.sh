# Reference solution (generated).
set -e
mv draft_410.txt final_410.txt
