# Reference solution (generated).
set -e
mkdir -p proj_523/src proj_523/docs
