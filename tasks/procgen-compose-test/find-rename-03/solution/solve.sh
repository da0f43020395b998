# Reference solution (generated).
set -e
grep -l FINAL drafts/*
mv drafts/d_234.txt release.txt
