set -e
mkdir -p output
python3 - <<'PY'
import csv, json, re
cfg = {}
for line in open("input/sprint.yaml"):
    m = re.match(r"(\w+):\s*([^#\s]+)", line)
    if m:
        cfg[m.group(1)] = m.group(2)
days, rate, ceremonies = int(cfg["working_days"]), float(cfg["points_per_focused_day"]), int(cfg["ceremonies_days"])
person, role = {}, {}
for r in csv.DictReader(open("input/team.csv")):
    pts = max(0, days - ceremonies - int(r["days_off"])) * float(r["focus_factor"]) * rate
    person[r["name"]] = pts
    role[r["role"]] = role.get(r["role"], 0) + pts
json.dump({"by_person": {k: round(v, 1) for k, v in person.items()},
           "by_role": {k: round(v, 1) for k, v in role.items()},
           "total": round(sum(person.values()), 1)}, open("output/capacity.json", "w"), indent=2)
PY
