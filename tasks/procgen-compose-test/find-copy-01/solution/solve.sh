# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_931.txt found.txt
