"""Grader for critical-path: forward and backward passes checked separately."""
import csv
import json
from pathlib import Path

# id: (earliest_start, earliest_finish, latest_start, slack)
EXPECTED = {"A": (0, 3, 0, 0), "B": (3, 8, 3, 0), "C": (3, 7, 4, 1), "D": (3, 5, 9, 6), "E": (8, 11, 8, 0),
            "F": (7, 9, 13, 6), "G": (11, 15, 11, 0), "H": (15, 16, 15, 0), "I": (3, 5, 14, 11)}


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"forward_pass": 0.0, "backward_pass": 0.0, "duration": 0.0, "critical_path": 0.0}
    try:
        with open(out / "schedule.csv", newline="", encoding="utf-8") as f:
            rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
        assert rows[0] == ["id", "earliest_start", "earliest_finish", "latest_start", "slack"]
        got = {r[0]: tuple(int(float(x)) for x in r[1:5]) for r in rows[1:]}
        if set(got) == set(EXPECTED) and [r[0] for r in rows[1:]] == sorted(EXPECTED):
            if all(got[k][:2] == v[:2] for k, v in EXPECTED.items()):
                scores["forward_pass"] = 1.0
            if all(got[k][2:] == v[2:] for k, v in EXPECTED.items()):
                scores["backward_pass"] = 1.0
    except Exception:
        pass
    try:
        data = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        if int(data["duration"]) == 16:
            scores["duration"] = 1.0
        if [str(x) for x in data["critical_path"]] == ["A", "B", "E", "G", "H"]:
            scores["critical_path"] = 1.0
    except Exception:
        pass
    return scores
