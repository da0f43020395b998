# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_584.txt found.txt
