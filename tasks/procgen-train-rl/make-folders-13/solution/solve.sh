# Reference solution (generated).
set -e
mkdir -p proj_794/src proj_794/docs
