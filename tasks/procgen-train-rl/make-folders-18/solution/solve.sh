# Reference solution (generated).
set -e
mkdir -p proj_950/src proj_950/docs
