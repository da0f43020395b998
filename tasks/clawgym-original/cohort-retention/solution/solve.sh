set -e
mkdir -p output
python3 - <<'PY'
import csv
signup = {r["user_id"]: r["signup_date"] for r in csv.DictReader(open("data/users.csv"))}
active = {}
for r in csv.DictReader(open("data/activity.csv")):
    if r["user_id"] in signup and r["date"] >= signup[r["user_id"]]:
        active.setdefault(r["user_id"], set()).add(r["date"][:7])
def shift(ym, k):
    y, m = map(int, ym.split("-")); m += k
    return f"{y + (m - 1) // 12}-{(m - 1) % 12 + 1:02d}"
with open("output/retention.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["cohort", "size", "m0", "m1", "m2", "m3"])
    for cohort in sorted({d[:7] for d in signup.values()}):
        users = [u for u, d in signup.items() if d[:7] == cohort]
        row = [cohort, len(users)]
        for k in range(4):
            month = shift(cohort, k)
            row.append("" if month > "2026-10" else round(100 * sum(month in active.get(u, ()) for u in users) / len(users), 1))
        w.writerow(row)
PY
