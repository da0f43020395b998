set -e
mkdir -p output
python3 - <<'PY'
import csv, datetime, re
day = datetime.date(2026, 12, 7)
def expand(field, lo, hi):
    out = set()
    for part in field.split(","):
        rng, _, step = part.partition("/")
        a, b = (lo, hi) if rng == "*" else (map(int, rng.split("-")) if "-" in rng else (int(rng), int(rng)))
        if step and rng != "*" and "-" not in rng:
            b = hi
        out.update(range(a, b + 1, int(step or 1)))
    return out
rows = []
for line in open("input/crontab"):
    line = line.strip()
    if not line or line.startswith("#") or re.match(r"^\w+=", line):
        continue
    body, _, name = line.partition("#")
    m, h, dom, mon, dow = body.split()[:5]
    if day.month not in expand(mon, 1, 12):
        runs = []
    else:
        dow_set = {d % 7 for d in expand(dow, 0, 7)}
        dom_ok, dow_ok = day.day in expand(dom, 1, 31), (day.isoweekday() % 7) in dow_set
        ok = (dom_ok or dow_ok) if (dom != "*" and dow != "*") else (dom_ok and dow_ok)
        runs = sorted((hh, mm) for hh in expand(h, 0, 23) for mm in expand(m, 0, 59)) if ok else []
    rows.append([name.strip(), len(runs), "%02d:%02d" % runs[0] if runs else ""])
with open("output/runs.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["job", "runs", "first_run"]); w.writerows(rows)
PY
