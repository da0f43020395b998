# Reference solution (generated).
set -e
mv draft_835.txt final_835.txt
