# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_421.txt done.txt
