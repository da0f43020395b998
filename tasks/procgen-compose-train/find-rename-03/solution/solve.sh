# Reference solution (generated).
set -e
grep -l FINAL drafts/*
mv drafts/d_487.txt release.txt
