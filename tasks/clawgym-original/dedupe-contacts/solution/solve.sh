set -e
mkdir -p output
python3 - <<'PY'
import csv
seen = set()
with open("input/contacts.csv", newline="") as f, open("output/contacts_clean.csv", "w", newline="") as g:
    r = csv.reader(f); w = csv.writer(g)
    w.writerow(next(r))
    for row in r:
        email = row[1].strip().lower()
        if email in seen:
            continue
        seen.add(email)
        row[1] = email
        w.writerow(row)
PY
