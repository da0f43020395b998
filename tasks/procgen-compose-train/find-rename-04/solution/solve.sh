# Reference solution (generated).
set -e
grep -l FINAL drafts/*
mv drafts/d_954.txt release.txt
