set -e
mkdir -p output
cat > output/hiring_plan.csv <<'CSV'
team,quarter,hires
Support,Q1,1
Support,Q2,2
Sales,Q2,2
Sales,Q3,2
Data,Q3,1
Design,Q3,1
Platform,Q4,3
Data,Q4,1
CSV
python3 - <<'PY'
import csv
salary = {r["team"]: int(r["avg_salary_eur"]) for r in csv.DictReader(open("input/teams.csv"))}
share = {"Q1": 1.0, "Q2": 0.75, "Q3": 0.5, "Q4": 0.25}
rows = list(csv.DictReader(open("output/hiring_plan.csv")))
cost = sum(salary[r["team"]] * share[r["quarter"]] * int(r["hires"]) for r in rows)
plan = "\n".join(f"| {r['team']} | {r['quarter']} | {r['hires']} | {salary[r['team']] * share[r['quarter']] * int(r['hires']):,.0f} |" for r in rows)
open("output/hiring_plan.md", "w").write(f"""# 2027 hiring plan

## Summary

Thirteen hires close every team's gap by year end, within recruiting's 4-per-quarter capacity.
The 2027 salary cost is EUR {cost:,.0f}, EUR {560000 - cost:,.0f} under the EUR 560,000 budget.

## Plan

| Team | Start quarter | Hires | 2027 cost (EUR) |
|---|---|---:|---:|
{plan}

Per quarter: Q1 1, Q2 4, Q3 4, Q4 4. Support starts one hire in Q1 and two in Q2 for the ticket
backlog; Sales hires start in Q2 and Q3, in time for the Q4 pipeline. The most expensive roles
(Platform, Data) start last, which keeps the 2027 cost down.

## Budget

2027 cost = annual salary x share of the year worked (Q1 100 %, Q2 75 %, Q3 50 %, Q4 25 %),
summed over hires: EUR {cost:,.0f}. Budget EUR 560,000; headroom EUR {560000 - cost:,.0f}.

## Risks

- All three Platform hires start in Q4; if a search slips, the team misses its target.
  Mitigation: open the Platform searches in Q2 so candidates are in the pipeline early.
- The plan assumes no attrition. Mitigation: keep the headroom as a backfill reserve.
- Recruiting runs at full capacity from Q2 to Q4. Mitigation: agree agency support for peaks.
""")
PY
