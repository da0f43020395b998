# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_462.txt found.txt
