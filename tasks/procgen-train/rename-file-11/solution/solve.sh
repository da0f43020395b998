# Reference solution (generated).
set -e
mv draft_241.txt final_241.txt
