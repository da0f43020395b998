set -e
mkdir -p output
python3 - <<'PY'
import json, re
counts, first = {}, None
for line in open("logs/app.log"):
    m = re.match(r"(\S+)\s+(\w+)\s+\[(\w+)\]", line)
    if m and m.group(2) == "ERROR":
        counts[m.group(3)] = counts.get(m.group(3), 0) + 1
        first = first or m.group(1)
json.dump(counts, open("output/errors.json", "w"), indent=2)
open("output/first_error.txt", "w").write(first + "\n")
PY
