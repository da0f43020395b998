# Reference solution (generated).
set -e
ls inbox
mv inbox/msg_525.txt done.txt
