set -e
mkdir -p output
python3 - <<'PY'
import csv, json, operator, re
ops = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}
def v(s):
    return tuple(int(x) for x in s.split("."))
def pad(a, b):
    n = max(len(a), len(b))
    return a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
pinned, unpinned = {}, []
for line in open("requirements.txt"):
    line = line.split("#")[0].strip()
    if not line:
        continue
    m = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*(==\s*([\w.]+))?", line)
    name = m.group(1).lower()
    if m.group(3):
        pinned[name] = m.group(3)
    else:
        unpinned.append(name)
rows = []
for adv in json.load(open("advisories.json")):
    name = adv["package"].lower()
    if name not in pinned:
        continue
    ok = True
    for cond in adv["affected"].split(","):
        op, ver = re.match(r"\s*(<=|>=|==|<|>)\s*([\w.]+)", cond).groups()
        a, b = pad(v(pinned[name]), v(ver))
        ok &= ops[op](a, b)
    if ok:
        rows.append([name, pinned[name], adv["id"], adv["fixed_in"]])
with open("output/vulnerable.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["package", "installed", "advisory", "fixed_in"]); w.writerows(sorted(rows, key=lambda r: (r[0], r[2])))
open("output/unpinned.txt", "w").write("".join(n + "\n" for n in sorted(unpinned)))
PY
