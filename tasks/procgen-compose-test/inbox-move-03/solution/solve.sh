# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_470.txt done.txt
