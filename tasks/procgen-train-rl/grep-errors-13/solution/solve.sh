# Reference solution (generated).
set -e
grep ERROR app.log > errors.txt
