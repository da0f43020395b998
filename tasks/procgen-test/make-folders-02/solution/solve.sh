# Reference solution (generated).
set -e
mkdir -p proj_304/src proj_304/docs
