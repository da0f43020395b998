# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_239.txt done.txt
