# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_836.txt found.txt
