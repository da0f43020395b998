# Reference solution (generated).
set -e
mkdir -p proj_817/src proj_817/docs
