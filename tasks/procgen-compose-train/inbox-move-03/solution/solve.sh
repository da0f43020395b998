# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_938.txt done.txt
