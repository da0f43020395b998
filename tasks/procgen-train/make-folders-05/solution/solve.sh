# Reference solution (generated).
set -e
mkdir -p proj_101/src proj_101/docs
