set -e
mkdir -p output
python3 - <<'PY'
import csv
rows = list(csv.reader(open("input/plans.csv")))
numeric = {"monthly_price_eur", "seats", "storage_gb"}
lines = ["# Pricing plans", "", "| " + " | ".join(rows[0]) + " |",
         "| " + " | ".join("---:" if h in numeric else "---" for h in rows[0]) + " |"]
lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
open("output/plans.md", "w").write("\n".join(lines) + "\n")
PY
