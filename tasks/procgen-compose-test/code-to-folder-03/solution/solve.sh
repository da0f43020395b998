# Reference solution (generated).
set -e
cat id.txt
mkdir run_824
