set -e
mkdir -p output
python3 - <<'PY'
import csv, json
rows = list(csv.DictReader(open("input/budget_vs_actual.csv")))
deps = {}
for r in rows:
    b, a = int(r["q3_budget_eur"]), int(r["q3_actual_eur"])
    deps[r["department"]] = {"budget": b, "actual": a, "variance_eur": a - b, "variance_pct": round(100 * (a - b) / b, 1)}
tb, ta = sum(d["budget"] for d in deps.values()), sum(d["actual"] for d in deps.values())
json.dump({"departments": {k: {"variance_eur": v["variance_eur"], "variance_pct": v["variance_pct"]} for k, v in deps.items()},
           "total_variance_eur": ta - tb, "total_variance_pct": round(100 * (ta - tb) / tb, 1)},
          open("output/variances.json", "w"), indent=2)
table = ["| Department | Budget (EUR) | Actual (EUR) | Variance (EUR) | Variance (%) |", "|---|---:|---:|---:|---:|"]
for k, v in sorted(deps.items(), key=lambda kv: -kv[1]["variance_eur"]):
    table.append(f"| {k} | {v['budget']:,} | {v['actual']:,} | {v['variance_eur']:+,} | {v['variance_pct']:+.1f} |")
report = f"""# Q3 budget variance report

## Overview

Q3 spending was EUR {ta:,} against a budget of EUR {tb:,}: an overrun of EUR {ta - tb:,}
({100 * (ta - tb) / tb:.1f} %). Three departments account for most of it; about half of the
overrun is timing that reverses in Q4.

## Variance by department

""" + "\n".join(table) + """

## Top overruns

1. **Marketing** (+EUR 58,700, +22.6 %): the autumn trade show moved from Q4 into Q3. Timing:
   the Q4 budget holds the matching slack, so the full year should land on plan.
2. **Sales** (+EUR 42,300, +10.3 %): two senior account executives joined a month earlier than
   planned. Timing for the salaries, but the run rate from Q4 on is as budgeted.
3. **Engineering** (+EUR 41,500, +5.1 %): cloud costs rose after the data-platform migration.
   A lasting cost increase until the savings plan that starts in Q4 takes effect.

## Recommendations

- Reforecast Q4 with Marketing's trade-show budget released, so the slack is not spent twice.
- Track Engineering's cloud savings plan monthly in Q4 and report the realised saving against
  the EUR 41,500 Q3 overrun.
- Add the early Sales hires' agency fees (People, +EUR 9,800) to the hiring business case.
- Ask Facilities for a maintenance reserve after the unplanned HVAC repair (+EUR 21,000).
"""
open("output/variance_report.md", "w").write(report)
PY
