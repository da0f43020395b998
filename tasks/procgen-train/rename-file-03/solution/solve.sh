# Reference solution (generated).
set -e
mv draft_181.txt final_181.txt
