# Reference solution (generated).
set -e
grep -l ERROR logs/*
rm logs/log_745.txt
