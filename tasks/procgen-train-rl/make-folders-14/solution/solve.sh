# Reference solution (generated).
set -e
mkdir -p proj_538/src proj_538/docs
