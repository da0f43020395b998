# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_115.txt found.txt
