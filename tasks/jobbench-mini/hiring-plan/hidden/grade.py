"""Code checks for hiring-plan: any plan that meets every constraint passes; the stated cost must match it."""
import csv
import re
from pathlib import Path

GAP = {"Platform": 3, "Data": 2, "Sales": 4, "Support": 3, "Design": 1}
SALARY = {"Platform": 90000, "Data": 85000, "Sales": 70000, "Support": 50000, "Design": 80000}
SHARE = {"Q1": 1.0, "Q2": 0.75, "Q3": 0.5, "Q4": 0.25}
BUDGET = 560000
SECTIONS = ["Summary", "Plan", "Budget", "Risks"]


def _plan(ws):
    with open(Path(ws) / "output" / "hiring_plan.csv", newline="", encoding="utf-8") as f:
        rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
    if rows[0] != ["team", "quarter", "hires"]:
        raise ValueError("bad header")
    plan = {}
    for team, quarter, hires in rows[1:]:
        if team not in GAP or quarter not in SHARE or int(hires) < 0:
            raise ValueError("bad row")
        plan[(team, quarter)] = plan.get((team, quarter), 0) + int(hires)
    return plan


def _numbers(text):
    out = []
    for num, k in re.findall(r"(\d[\d,]*(?:\.\d+)?)\s*([kK]\b)?", text):
        out.append(float(num.replace(",", "")) * (1000 if k else 1))
    return out


def grade(transcript, workspace_path):
    scores = {"gaps_closed": 0.0, "recruiter_capacity": 0.0, "timing_constraints": 0.0,
              "within_budget": 0.0, "report_states_cost": 0.0}
    try:
        plan = _plan(workspace_path)
    except Exception:
        return scores
    if not plan:
        return scores
    if all(sum(v for (t, _), v in plan.items() if t == team) == gap for team, gap in GAP.items()):
        scores["gaps_closed"] = 1.0
    if all(sum(v for (_, q), v in plan.items() if q == quarter) <= 4 for quarter in SHARE):
        scores["recruiter_capacity"] = 1.0
    support_early = plan.get(("Support", "Q1"), 0) + plan.get(("Support", "Q2"), 0)
    if support_early >= 2 and plan.get(("Sales", "Q4"), 0) == 0:
        scores["timing_constraints"] = 1.0
    if not scores["gaps_closed"]:
        # a plan hiring too few fits any capacity or timing rule: those count only for a plan that closes the gaps
        scores["recruiter_capacity"] = scores["timing_constraints"] = 0.0
    cost = sum(SALARY[t] * SHARE[q] * n for (t, q), n in plan.items())
    if cost <= BUDGET and scores["gaps_closed"]:
        scores["within_budget"] = 1.0
    try:
        text = (Path(workspace_path) / "output" / "hiring_plan.md").read_text(encoding="utf-8")
        heads = re.findall(r"^##\s+(.+?)\s*$", text, flags=re.M)
        budget = text.split("## Budget", 1)[1] if "## Budget" in text else ""
        # one stated total, for a plan that closes the gaps: a list of candidate totals around it is a hedge
        near = [n for n in _numbers(budget) if n != BUDGET and abs(n - cost) <= 0.25 * cost]
        if scores["gaps_closed"] and all(s in heads for s in SECTIONS) and near \
                and all(abs(n - cost) <= 1000 for n in near):
            scores["report_states_cost"] = 1.0
    except Exception:
        pass
    return scores
