# Reference: table figure (USD thousands) plus the spent supplemental from note 2.
set -e
mkdir -p output
python3 - <<'PY'
import csv
row = next(r for r in csv.DictReader(open("docs/fy2025_expenditures.csv")) if r["program"] == "Public Transit Operations")
total_million = int(row["fy2025_actual_usd_thousands"]) / 1000 + 18.6
open("output/answer.txt", "w").write(f"<answer>{total_million:.1f} million</answer>\n")
PY
