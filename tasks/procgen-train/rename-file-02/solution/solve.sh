# Reference solution (generated).
set -e
mv draft_147.txt final_147.txt
