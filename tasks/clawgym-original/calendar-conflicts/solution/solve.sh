set -e
mkdir -p output
python3 - <<'PY'
import itertools, json
from datetime import datetime
events = json.load(open("input/calendar.json"))
t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
conflicts, hours = [], {}
for a, b in itertools.combinations(events, 2):
    if t(a["start"]) < t(b["end"]) and t(b["start"]) < t(a["end"]):
        lo, hi = sorted([a["id"], b["id"]])
        conflicts += [{"person": p, "a": lo, "b": hi} for p in set(a["attendees"]) & set(b["attendees"])]
conflicts.sort(key=lambda d: (d["person"], d["a"], d["b"]))
for e in events:
    for p in e["attendees"]:
        hours[p] = hours.get(p, 0) + (t(e["end"]) - t(e["start"])).total_seconds() / 3600
json.dump(conflicts, open("output/conflicts.json", "w"), indent=2)
json.dump(hours, open("output/hours.json", "w"), indent=2)
PY
