set -e
mkdir -p output
python3 - <<'PY'
import csv, json, math
by_route = {}
for line in open("input/requests.jsonl"):
    if line.strip():
        r = json.loads(line)
        if r["status"] < 500:
            by_route.setdefault(r["route"], []).append(r["latency_ms"])
def pct(xs, p):
    return xs[max(1, math.ceil(p / 100 * len(xs))) - 1]
slo = json.load(open("input/slo.json"))["p95_ms"]
breaches = []
with open("output/latency.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["route", "count", "p50", "p95", "p99"])
    for route in sorted(by_route):
        xs = sorted(by_route[route])
        w.writerow([route, len(xs), pct(xs, 50), pct(xs, 95), pct(xs, 99)])
        if pct(xs, 95) > slo[route]:
            breaches.append(route)
open("output/slo_breaches.txt", "w").write("".join(r + "\n" for r in breaches))
PY
