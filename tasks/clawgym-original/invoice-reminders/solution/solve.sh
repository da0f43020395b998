set -e
mkdir -p output/reminders
python3 - <<'PY'
import csv, re
from datetime import date
today = date(2026, 11, 30)
text = open("input/templates.md").read()
templates = {m.group(1): m.group(2).strip() for m in re.finditer(r"^## (\w+)\n(.*?)(?=^## |\Z)", text, re.S | re.M)}
rows = []
for r in csv.DictReader(open("input/invoices.csv")):
    days = (today - date.fromisoformat(r["due_date"])).days
    if r["paid"] != "no" or days <= 0:
        continue
    tier = "friendly" if days <= 14 else "firm" if days <= 30 else "final"
    body = templates[tier].format(invoice=r["invoice"], client=r["client"], amount=f"{float(r['amount_eur']):.2f}",
                                  due_date=r["due_date"], days=days)
    open(f"output/reminders/{r['invoice']}.txt", "w").write(f"To: {r['email']}\n{body}\n")
    rows.append([r["invoice"], r["client"], days, tier])
with open("output/reminders/summary.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["invoice", "client", "days_overdue", "template"])
    w.writerows(sorted(rows, key=lambda x: -x[2]))
PY
