"""Grader for room-booking: the greedy assignment is unique, so rows are compared exactly."""
import csv
from pathlib import Path

EXPECTED = {"M01": "Atlas", "M02": "Borealis", "M03": "Cedar", "M04": "UNASSIGNED", "M05": "UNASSIGNED",
            "M06": "Cedar", "M07": "Atlas", "M08": "Dune", "M09": "Ember", "M10": "UNASSIGNED"}
EARLY = ["M01", "M02", "M06", "M08"]


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"first_wave": 0.0, "all_assignments": 0.0, "unassigned_list": 0.0}
    try:
        with open(out / "assignments.csv", newline="", encoding="utf-8") as f:
            rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
        assert rows[0] == ["meeting_id", "room"]
        got = {r[0]: r[1] for r in rows[1:]}
        if all(got.get(m) == EXPECTED[m] for m in EARLY):
            scores["first_wave"] = 1.0
        if got == EXPECTED and [r[0] for r in rows[1:]] == sorted(EXPECTED):
            scores["all_assignments"] = 1.0
    except Exception:
        pass
    try:
        lines = [ln.strip() for ln in (out / "unassigned.txt").read_text(encoding="utf-8").splitlines() if ln.strip()]
        if sorted(lines) == ["M04", "M05", "M10"]:
            scores["unassigned_list"] = 1.0
    except Exception:
        pass
    return scores
