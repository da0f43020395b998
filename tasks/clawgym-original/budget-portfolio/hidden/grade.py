"""Grader for budget-portfolio: the budget comes from the instruction; optimal sets are unique."""
import json
import re
from pathlib import Path

COST = {"P01": 40, "P02": 75, "P03": 30, "P04": 55, "P05": 90, "P06": 25, "P07": 10, "P08": 60,
        "P09": 20, "P10": 35, "P11": 15, "P12": 45}
VALUE = {"P01": 62, "P02": 90, "P03": 41, "P04": 70, "P05": 118, "P06": 30, "P07": 9, "P08": 85,
         "P09": 27, "P10": 44, "P11": 16, "P12": 66}
OPTIMUM = {150: (215, ["P01", "P03", "P08", "P09"]),
           240: (334, ["P01", "P03", "P07", "P08", "P09", "P10", "P12"])}


def _budget(transcript):
    m = re.search(r"budget of (\d+)k", str(transcript.get("instruction", "")))
    return int(m.group(1)) if m and int(m.group(1)) in OPTIMUM else 150


def grade(transcript, workspace_path):
    budget = _budget(transcript)
    best, best_set = OPTIMUM[budget]
    scores = {"within_budget": 0.0, "optimal_value": 0.0, "totals_consistent": 0.0, "sorted_ids": 0.0}
    try:
        data = json.loads((Path(workspace_path) / "output" / f"portfolio-{budget}.json").read_text(encoding="utf-8"))
        sel = [str(x) for x in data["selected"]]
        if not sel or not set(sel) <= set(COST) or len(sel) != len(set(sel)):
            return scores
    except Exception:
        return scores
    cost, value = sum(COST[s] for s in sel), sum(VALUE[s] for s in sel)
    # staying within budget is trivial (pick the cheapest project): it earns credit only with the optimum
    if cost > budget or value != best:
        return scores
    scores["within_budget"] = scores["optimal_value"] = 1.0
    try:
        if int(data["total_cost_k"]) == cost and int(data["total_value"]) == value and int(data["budget_k"]) == budget:
            scores["totals_consistent"] = 1.0
    except Exception:
        pass
    if sel == sorted(sel) and scores["optimal_value"]:
        scores["sorted_ids"] = 1.0
    return scores
