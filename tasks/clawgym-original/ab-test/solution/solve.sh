set -e
mkdir -p output
python3 - <<'PY'
import csv, json, math
rows = list(csv.DictReader(open("input/experiment.csv")))
arms = {}
for r in rows:
    arms.setdefault(r["user_id"], set()).add(r["variant"])
bad = {u for u, a in arms.items() if len(a) > 1}
stats = {"A": [0, 0], "B": [0, 0]}
for r in rows:
    if r["user_id"] not in bad:
        stats[r["variant"]][0] += 1; stats[r["variant"]][1] += int(r["converted"])
(na, ca), (nb, cb) = stats["A"], stats["B"]
ra, rb = ca / na, cb / nb
p = (ca + cb) / (na + nb)
z = (rb - ra) / math.sqrt(p * (1 - p) * (1 / na + 1 / nb))
out = {v: {"users": n, "conversions": c, "rate": round(c / n, 4)} for v, (n, c) in stats.items()}
out.update(excluded_users=len(bad), lift_pct=round(100 * (rb - ra) / ra, 1), z=round(z, 2),
           winner=("B" if z > 0 else "A") if abs(z) >= 1.96 else "none")
json.dump(out, open("output/result.json", "w"), indent=2)
PY
