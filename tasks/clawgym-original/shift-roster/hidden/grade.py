"""Grader for shift-roster: any roster that satisfies every rule passes; rule checks count only for a complete roster."""
import csv
from pathlib import Path

DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri"]
DEMAND = {("Mon", "early"): 2, ("Mon", "late"): 2, ("Tue", "early"): 2, ("Tue", "late"): 1, ("Wed", "early"): 2,
          ("Wed", "late"): 2, ("Thu", "early"): 1, ("Thu", "late"): 2, ("Fri", "early"): 2, ("Fri", "late"): 2}
MAX = {"Ana": 4, "Ben": 3, "Chloe": 4, "Dev": 5, "Eli": 2, "Fatima": 4}
OFF = {"Ana": {"Mon-early", "Mon-late"}, "Chloe": {"Wed-early", "Wed-late", "Thu-early"},
       "Dev": {"Fri-late"}, "Eli": {"Tue-early", "Tue-late"}}


def grade(transcript, workspace_path):
    scores = {"rows_valid": 0.0, "demand_covered": 0.0, "max_shifts": 0.0, "availability": 0.0, "same_day_and_rest": 0.0}
    try:
        with open(Path(workspace_path) / "output" / "roster.csv", newline="", encoding="utf-8") as f:
            rows = [tuple(c.strip() for c in r) for r in csv.reader(f) if r]
        assert rows[0] == ("day", "shift", "name")
        plan = rows[1:]
    except Exception:
        return scores
    if not plan or len(set(plan)) != len(plan) or any(len(r) != 3 or r[:2] not in DEMAND or r[2] not in MAX for r in plan):
        return scores
    scores["rows_valid"] = 1.0
    counts = {}
    for day, shift, _ in plan:
        counts[(day, shift)] = counts.get((day, shift), 0) + 1
    if counts != DEMAND:
        return scores
    scores["demand_covered"] = 1.0
    worked = {n: {(d, s) for d, s, m in plan if m == n} for n in MAX}
    scores["max_shifts"] = 1.0 if all(len(worked[n]) <= MAX[n] for n in MAX) else 0.0
    scores["availability"] = 1.0 if all(f"{d}-{s}" not in OFF.get(n, set()) for d, s, n in plan) else 0.0
    ok = True
    for n, shifts in worked.items():
        for i, day in enumerate(DAYS):
            if (day, "early") in shifts and (day, "late") in shifts:
                ok = False
            if i < 4 and (day, "late") in shifts and (DAYS[i + 1], "early") in shifts:
                ok = False
    scores["same_day_and_rest"] = 1.0 if ok else 0.0
    return scores
