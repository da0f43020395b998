# Reference solution (generated).
set -e
mv draft_717.txt final_717.txt
