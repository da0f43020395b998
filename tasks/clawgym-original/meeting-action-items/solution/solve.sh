set -e
mkdir -p output
python3 - <<'PY'
import csv, json, re
from collections import Counter
from pathlib import Path
pat = re.compile(r"ACTION: @(\S+) (.+?) \(due (\d{4}-\d{2}-\d{2})\)")
rows = []
for p in sorted(Path("notes").glob("*.md")):
    for line in p.read_text().splitlines():
        m = pat.search(line)
        if m:
            rows.append((m.group(1), m.group(2).strip(), m.group(3), p.stem))
rows.sort(key=lambda r: (r[2], r[0]))
with open("output/actions.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["owner", "task", "due", "meeting"]); w.writerows(rows)
Path("output/by_owner.json").write_text(json.dumps(Counter(r[0] for r in rows), indent=2))
PY
