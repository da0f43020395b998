# Reference solution (generated).
set -e
mkdir -p proj_223/src proj_223/docs
