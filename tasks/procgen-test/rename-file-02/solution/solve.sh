# Reference solution (generated).
set -e
mv draft_433.txt final_433.txt
