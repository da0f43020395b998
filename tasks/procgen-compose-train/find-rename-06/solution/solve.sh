# Reference solution (generated).
set -e
grep -l FINAL drafts/*
mv drafts/d_884.txt release.txt
