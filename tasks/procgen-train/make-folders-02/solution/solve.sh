# Reference solution (generated).
set -e
mkdir -p proj_865/src proj_865/docs
