# Reference solution (generated).
set -e
grep -l FINAL drafts/*
mv drafts/d_607.txt release.txt
