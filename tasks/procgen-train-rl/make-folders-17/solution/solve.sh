# Reference solution (generated).
set -e
mkdir -p proj_613/src proj_613/docs
