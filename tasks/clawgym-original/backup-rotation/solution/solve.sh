set -e
mkdir -p output
python3 - <<'PY'
import datetime, re
names = sorted(l.strip() for l in open("input/backups.txt")
               if re.fullmatch(r"backup-\d{4}-\d{2}-\d{2}\.tar\.gz", l.strip()))
dated = sorted((datetime.date.fromisoformat(n[7:17]), n) for n in names)
keep = {n for _, n in dated[-7:]}
weeks, months = {}, {}
for day, n in dated:
    weeks[day.isocalendar()[:2]] = n
    months[(day.year, day.month)] = n
keep |= {weeks[k] for k in sorted(weeks)[-4:]} | {months[k] for k in sorted(months)[-3:]}
open("output/keep.txt", "w").write("".join(n + "\n" for n in sorted(keep)))
open("output/delete.txt", "w").write("".join(n + "\n" for n in names if n not in keep))
PY
