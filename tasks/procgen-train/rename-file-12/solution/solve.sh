# Reference solution (generated).
set -e
mv draft_889.txt final_889.txt
