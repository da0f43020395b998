set -e
mkdir -p output
python3 - <<'PY'
import csv, json, re
from pathlib import Path
def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        out.update(flat(v, key + ".") if isinstance(v, dict) else {key: v})
    return out
holes = lambda s: set(re.findall(r"\{(\w+)\}", s))
en = flat(json.load(open("locales/en.json")))
report, rows = {}, []
for path in sorted(Path("locales").glob("*.json")):
    if path.stem == "en":
        continue
    loc = flat(json.load(open(path)))
    report[path.stem] = {"missing": sorted(set(en) - set(loc)), "extra": sorted(set(loc) - set(en)),
                         "placeholder_mismatch": sorted(k for k in set(en) & set(loc) if holes(en[k]) != holes(loc[k]))}
    done = len(set(en) & set(loc))
    rows.append([path.stem, done, len(en), round(100 * done / len(en), 1)])
json.dump(report, open("output/i18n_report.json", "w"), indent=2)
with open("output/coverage.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["language", "translated", "total", "percent"]); w.writerows(rows)
PY
