set -e
mkdir -p output
python3 - <<'PY'
import csv, json
rows = [r for r in csv.DictReader(open("input/survey.csv")) if r["score"].strip().isdigit()]
def nps(scores):
    return round(100 * (sum(s >= 9 for s in scores) - sum(s <= 6 for s in scores)) / len(scores), 1)
segs = sorted({r["segment"] for r in rows})
json.dump({"responses": len(rows), "overall": nps([int(r["score"]) for r in rows]),
           "by_segment": {s: nps([int(r["score"]) for r in rows if r["segment"] == s]) for s in segs}},
          open("output/nps.json", "w"), indent=2)
open("output/detractors.txt", "w").write("".join(
    r["respondent_id"] + "\n" for r in sorted(rows, key=lambda r: r["respondent_id"]) if int(r["score"]) <= 6))
PY
