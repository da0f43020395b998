# Runs identically for every variant, so it writes the alert files for both thresholds.
set -e
mkdir -p output
python3 - <<'PY'
import json
rows = [l.split() for l in open("input/df.txt").read().splitlines()[1:] if l.strip()]
rows = [r for r in rows if r[0] not in ("tmpfs", "overlay")]
for th in (85, 90):
    sel = sorted((r for r in rows if int(r[4].rstrip("%")) >= th), key=lambda r: (-int(r[4].rstrip("%")), r[5]))
    open(f"output/alerts-{th}.txt", "w").write("".join(r[5] + "\n" for r in sel))
    json.dump({"threshold": th, "count": len(sel), "free_gb": {r[5]: round(int(r[3]) / 1048576, 1) for r in sel}},
              open(f"output/alerts-{th}.json", "w"), indent=2)
PY
