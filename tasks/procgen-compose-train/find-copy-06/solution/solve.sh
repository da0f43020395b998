# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_297.txt found.txt
