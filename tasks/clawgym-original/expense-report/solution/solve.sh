# Runs identically for every variant, so it writes the summary for each month in the data.
set -e
mkdir -p output
python3 - <<'PY'
import csv, json
from collections import defaultdict
rates = json.load(open("input/rates.json"))
months = defaultdict(lambda: {"total": 0.0, "cat": defaultdict(float), "emp": defaultdict(float)})
for r in csv.DictReader(open("input/expenses.csv")):
    eur = float(r["amount"]) * rates[r["currency"]]
    m = months[r["date"][:7]]
    m["total"] += eur; m["cat"][r["category"]] += eur; m["emp"][r["employee"]] += eur
for month, m in months.items():
    out = {"month": month, "total_eur": round(m["total"], 2),
           "by_category": {k: round(v, 2) for k, v in m["cat"].items()},
           "by_employee": {k: round(v, 2) for k, v in m["emp"].items()}}
    json.dump(out, open(f"output/expenses-{month}.json", "w"), indent=2)
PY
