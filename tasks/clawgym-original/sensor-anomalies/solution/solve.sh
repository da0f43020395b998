set -e
mkdir -p output
python3 - <<'PY'
import collections, csv, json
limits = json.load(open("input/limits.json"))
found = []
for r in csv.DictReader(open("input/readings.csv")):
    for field, lim in limits.items():
        raw = r[field].strip()
        reason = ("missing" if raw == "" else "below_min" if float(raw) < lim["min"]
                  else "above_max" if float(raw) > lim["max"] else None)
        if reason:
            found.append((r["timestamp"], r["sensor_id"], field, raw, reason))
found.sort(key=lambda x: x[:3])
with open("output/anomalies.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["timestamp", "sensor_id", "field", "value", "reason"]); w.writerows(found)
json.dump(collections.Counter(x[1] for x in found), open("output/summary.json", "w"), indent=2)
PY
