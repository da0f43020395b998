# Reference solution (generated).
set -e
mkdir -p proj_820/src proj_820/docs
