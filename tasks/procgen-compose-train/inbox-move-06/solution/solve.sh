# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_990.txt done.txt
