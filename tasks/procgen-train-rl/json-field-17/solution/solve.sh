# Reference solution (generated).
set -e
python3 -c "import json; print(json.load(open('config.json'))['depth'])" > value.txt
