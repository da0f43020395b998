# Reference solution (generated).
set -e
mkdir -p proj_889/src proj_889/docs
