# Reference solution (generated).
set -e
mv draft_461.txt final_461.txt
