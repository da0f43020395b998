# Reference solution (generated).
set -e
rm tmp_921.txt
