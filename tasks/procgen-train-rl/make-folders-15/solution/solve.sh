# Reference solution (generated).
set -e
mkdir -p proj_494/src proj_494/docs
