set -e
mkdir -p output
python3 - <<'PY'
import csv, json
tasks = {t["id"]: t for t in json.load(open("input/project.json"))["tasks"]}
order, seen = [], set()
def visit(i):
    if i not in seen:
        seen.add(i)
        for d in tasks[i]["depends_on"]:
            visit(d)
        order.append(i)
for i in sorted(tasks):
    visit(i)
es, ef = {}, {}
for i in order:
    es[i] = max((ef[d] for d in tasks[i]["depends_on"]), default=0)
    ef[i] = es[i] + tasks[i]["duration_days"]
end = max(ef.values())
succ = {i: [j for j in tasks if i in tasks[j]["depends_on"]] for i in tasks}
ls = {}
for i in reversed(order):
    lf = min((ls[s] for s in succ[i]), default=end)
    ls[i] = lf - tasks[i]["duration_days"]
with open("output/schedule.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["id", "earliest_start", "earliest_finish", "latest_start", "slack"])
    for i in sorted(tasks):
        w.writerow([i, es[i], ef[i], ls[i], ls[i] - es[i]])
crit = sorted((i for i in tasks if ls[i] == es[i]), key=lambda i: (es[i], i))
json.dump({"duration": end, "critical_path": crit}, open("output/summary.json", "w"), indent=2)
PY
