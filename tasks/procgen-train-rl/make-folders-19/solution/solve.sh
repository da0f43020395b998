# Reference solution (generated).
set -e
mkdir -p proj_173/src proj_173/docs
