# Reference solution (generated).
set -e
mv draft_830.txt final_830.txt
