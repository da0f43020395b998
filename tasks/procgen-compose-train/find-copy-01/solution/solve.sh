# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_947.txt found.txt
