# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_552.txt done.txt
