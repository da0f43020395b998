# Reference solution (generated).
set -e
mkdir -p proj_350/src proj_350/docs
