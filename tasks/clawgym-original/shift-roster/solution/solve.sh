set -e
mkdir -p output
python3 - <<'PY'
import csv, itertools
days = ["Mon", "Tue", "Wed", "Thu", "Fri"]
demand = [(r["day"], r["shift"], int(r["needed"])) for r in csv.DictReader(open("input/demand.csv"))]
staff = {r["name"]: (int(r["max_shifts"]), set(filter(None, r["unavailable"].split(";"))))
         for r in csv.DictReader(open("input/staff.csv"))}
def ok(name, day, shift, plan):
    mine = {(d, s) for d, s, n in plan if n == name}
    cap, off = staff[name]
    if len(mine) >= cap or f"{day}-{shift}" in off or (day, "early" if shift == "late" else "late") in mine:
        return False
    i = days.index(day)
    if shift == "early" and i > 0 and (days[i - 1], "late") in mine:
        return False
    if shift == "late" and i < 4 and (days[i + 1], "early") in mine:
        return False
    return True
def search(k, plan):
    if k == len(demand):
        return plan
    day, shift, need = demand[k]
    free = [n for n in staff if ok(n, day, shift, plan)]
    for group in itertools.combinations(free, need):
        found = search(k + 1, plan + [(day, shift, n) for n in group])
        if found:
            return found
    return None
plan = search(0, [])
with open("output/roster.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["day", "shift", "name"]); w.writerows(plan)
PY
