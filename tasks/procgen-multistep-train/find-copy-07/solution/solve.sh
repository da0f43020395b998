# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_957.txt found.txt
