# Reference solution (generated).
set -e
mkdir -p proj_915/src proj_915/docs
