# Reference solution (generated).
set -e
mkdir -p proj_893/src proj_893/docs
