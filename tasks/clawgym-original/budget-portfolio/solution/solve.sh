# Runs identically for every variant, so it writes the portfolio for both budgets (exact 0/1 knapsack).
set -e
mkdir -p output
python3 - <<'PY'
import csv, json
projects = [(r["id"], int(r["cost_k"]), int(r["value"])) for r in csv.DictReader(open("input/projects.csv"))]
for budget in (150, 240):
    best = {0: (0, [])}  # cost -> (value, ids)
    for pid, cost, value in projects:
        for c, (v, ids) in list(best.items()):
            nc = c + cost
            if nc <= budget and (nc not in best or best[nc][0] < v + value):
                best[nc] = (v + value, ids + [pid])
    cost, (value, ids) = max(best.items(), key=lambda kv: (kv[1][0], -kv[0]))
    json.dump({"budget_k": budget, "selected": sorted(ids), "total_cost_k": cost, "total_value": value},
              open(f"output/portfolio-{budget}.json", "w"), indent=2)
PY
