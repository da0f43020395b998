# Reference solution (generated).
set -e
mkdir -p proj_781/src proj_781/docs
