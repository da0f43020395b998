# Reference solution (generated).
set -e
mkdir -p proj_601/src proj_601/docs
