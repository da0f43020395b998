# Reference solution (generated).
set -e
mkdir -p proj_183/src proj_183/docs
