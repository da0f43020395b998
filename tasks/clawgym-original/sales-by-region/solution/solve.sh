set -e
mkdir -p output
python3 - <<'PY'
import collections, csv
rev, orders, prod = collections.Counter(), collections.Counter(), collections.Counter()
for r in csv.DictReader(open("data/sales.csv")):
    region, value = r["region"].strip(), int(r["units"]) * float(r["unit_price"])
    rev[region] += value; orders[region] += 1; prod[r["product"]] += value
with open("output/region_totals.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["region", "revenue", "orders"])
    for region, value in sorted(rev.items(), key=lambda kv: -kv[1]):
        w.writerow([region, f"{value:.2f}", orders[region]])
open("output/top_product.txt", "w").write(prod.most_common(1)[0][0] + "\n")
PY
