# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_179.txt done.txt
