# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_891.txt done.txt
