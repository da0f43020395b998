# Reference solution (generated).
set -e
grep -l FINAL drafts/*
mv drafts/d_643.txt release.txt
