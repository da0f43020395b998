# Reference solution (generated).
set -e
grep -l FINAL drafts/*
mv drafts/d_789.txt release.txt
