# Reference solution (generated).
set -e
mkdir -p proj_617/src proj_617/docs
