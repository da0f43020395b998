set -e
mkdir -p output
python3 - <<'PY'
import csv, math
rows = []
for r in csv.DictReader(open("input/inventory.csv")):
    use, pack, on_hand = int(r["daily_usage"]), int(r["pack_size"]), int(r["on_hand"])
    point = use * int(r["lead_time_days"]) + int(r["safety_stock"])
    if on_hand <= point:
        rows.append([r["sku"], math.ceil((point + 30 * use - on_hand) / pack) * pack])
with open("output/reorder.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["sku", "order_qty"]); w.writerows(sorted(rows))
PY
