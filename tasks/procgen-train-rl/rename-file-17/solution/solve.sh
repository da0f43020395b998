# Reference solution (generated).
set -e
mv draft_802.txt final_802.txt
