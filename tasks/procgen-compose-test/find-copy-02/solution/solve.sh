# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_502.txt found.txt
