# Reference solution (generated).
set -e
grep -l FINAL drafts/*
mv drafts/d_628.txt release.txt
