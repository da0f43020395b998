# Reference solution (generated).
set -e
mkdir -p proj_774/src proj_774/docs
