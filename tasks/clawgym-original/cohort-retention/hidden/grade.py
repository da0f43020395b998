"""Grader for cohort-retention: precomputed retention matrix; the right-censored cells must be empty."""
import csv
from pathlib import Path

EXPECTED = [
    ["2026-07", 8, 75.0, 62.5, 37.5, 12.5],
    ["2026-08", 10, 80.0, 50.0, 40.0, ""],
    ["2026-09", 10, 90.0, 60.0, "", ""],
    ["2026-10", 7, 100.0, "", "", ""],
]


def _cell_ok(got, want):
    if want == "":
        return got.strip() == ""
    try:
        return abs(float(got) - want) < 0.051
    except Exception:
        return False


def grade(transcript, workspace_path):
    scores = {"cohorts_and_sizes": 0.0, "month0": 0.0, "later_months": 0.0, "censored_cells_empty": 0.0}
    try:
        with open(Path(workspace_path) / "output" / "retention.csv", newline="", encoding="utf-8") as f:
            rows = [r for r in csv.reader(f) if r]
        assert [c.strip() for c in rows[0]] == ["cohort", "size", "m0", "m1", "m2", "m3"]
        body = [r + [""] * (6 - len(r)) for r in rows[1:]]
        if len(body) != len(EXPECTED):
            return scores
    except Exception:
        return scores
    try:
        if all(r[0].strip() == e[0] and int(r[1]) == e[1] for r, e in zip(body, EXPECTED)):
            scores["cohorts_and_sizes"] = 1.0
        if all(_cell_ok(r[2], e[2]) for r, e in zip(body, EXPECTED)):
            scores["month0"] = 1.0
        if all(_cell_ok(r[i], e[i]) for r, e in zip(body, EXPECTED) for i in (3, 4, 5) if e[i] != ""):
            scores["later_months"] = 1.0
        if all(_cell_ok(r[i], "") for r, e in zip(body, EXPECTED) for i in (3, 4, 5) if e[i] == ""):
            scores["censored_cells_empty"] = scores["month0"]
    except Exception:
        pass
    return scores
