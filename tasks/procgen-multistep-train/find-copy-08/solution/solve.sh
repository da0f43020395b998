# Reference solution (generated).
set -e
grep -l KEY notes/*
cp notes/note_552.txt found.txt
