# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_467.txt done.txt
