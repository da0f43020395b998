# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_365.txt found.txt
