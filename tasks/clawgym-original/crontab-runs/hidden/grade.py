"""Grader for crontab-runs: run counts for Monday 2026-12-07, with the dom/dow OR rule as its own sub-score."""
import csv
from pathlib import Path

EXPECTED = [
    ("heartbeat", 96, "00:00"), ("nightly-backup", 1, "02:00"), ("crm-sync", 10, "08:30"),
    ("weekly-report", 4, "09:00"), ("monthly-invoice", 0, ""), ("audit", 1, "23:45"),
    ("weekend-cleanup", 0, ""), ("semiannual", 0, ""),
]


def grade(transcript, workspace_path):
    scores = {"jobs_listed": 0.0, "run_counts": 0.0, "first_runs": 0.0, "dom_dow_rule": 0.0}
    try:
        with open(Path(workspace_path) / "output" / "runs.csv", newline="", encoding="utf-8") as f:
            rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
    except Exception:
        return scores
    if not rows or rows[0] != ["job", "runs", "first_run"]:
        return scores
    body = rows[1:]
    try:
        if [r[0] for r in body] == [e[0] for e in EXPECTED]:
            scores["jobs_listed"] = 1.0
        got = {r[0]: (int(r[1]), r[2] if len(r) > 2 else "") for r in body}
        if all(got.get(j, (None,))[0] == n for j, n, _ in EXPECTED):
            scores["run_counts"] = 1.0
        if all(j in got and got[j][1] == t for j, _, t in EXPECTED):
            scores["first_runs"] = 1.0
        if got.get("audit") == (1, "23:45") and got.get("monthly-invoice", (None,))[0] == 0:
            scores["dom_dow_rule"] = 1.0
    except Exception:
        pass
    return scores
