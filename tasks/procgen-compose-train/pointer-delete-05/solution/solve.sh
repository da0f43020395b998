# Reference solution (generated).
set -e
cat target.txt
rm tmp_802.txt
