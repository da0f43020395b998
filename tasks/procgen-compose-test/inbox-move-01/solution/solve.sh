# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_207.txt done.txt
