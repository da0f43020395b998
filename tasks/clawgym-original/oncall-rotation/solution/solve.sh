set -e
mkdir -p output
python3 - <<'PY'
import csv, json
from datetime import date, timedelta
names = [l.strip() for l in open("input/engineers.txt") if l.strip() and not l.startswith("#")]
vac = [(r["name"], date.fromisoformat(r["first_day"]), date.fromisoformat(r["last_day"]))
       for r in csv.DictReader(open("input/vacations.csv"))]
def free(name, monday):
    sunday = monday + timedelta(days=6)
    return not any(n == name and a <= sunday and b >= monday for n, a, b in vac)
pointer, rows, load = 0, [], {n: 0 for n in names}
for week in range(8):
    monday = date(2027, 1, 4) + timedelta(weeks=week)
    order = [(pointer + k) % len(names) for k in range(len(names))]
    avail = [i for i in order if free(names[i], monday)]
    primary = avail[0]
    secondary = next(i for i in [(primary + k) % len(names) for k in range(1, len(names))] if free(names[i], monday))
    rows.append([monday.isoformat(), names[primary], names[secondary]])
    load[names[primary]] += 1
    pointer = (primary + 1) % len(names)
with open("output/rotation.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["week_start", "primary", "secondary"]); w.writerows(rows)
json.dump(load, open("output/load.json", "w"), indent=2)
PY
