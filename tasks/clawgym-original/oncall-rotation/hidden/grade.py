"""Grader for oncall-rotation: primaries and secondaries checked separately, plus the load summary."""
import csv
import json
from pathlib import Path

EXPECTED = [
    ("2027-01-04", "kai", "mateo"), ("2027-01-11", "lucia", "mateo"), ("2027-01-18", "mateo", "noor"),
    ("2027-01-25", "noor", "oskar"), ("2027-02-01", "oskar", "lucia"), ("2027-02-08", "kai", "lucia"),
    ("2027-02-15", "lucia", "noor"), ("2027-02-22", "noor", "oskar"),
]
LOAD = {"kai": 2, "lucia": 2, "mateo": 1, "noor": 2, "oskar": 1}


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"weeks": 0.0, "primaries": 0.0, "secondaries": 0.0, "load": 0.0}
    try:
        with open(out / "rotation.csv", newline="", encoding="utf-8") as f:
            rows = [tuple(c.strip() for c in r) for r in csv.reader(f) if r]
        assert rows[0] == ("week_start", "primary", "secondary")
        body = rows[1:]
        if [r[0] for r in body] == [e[0] for e in EXPECTED]:
            scores["weeks"] = 1.0
            if [r[1] for r in body] == [e[1] for e in EXPECTED]:
                scores["primaries"] = 1.0
            if [r[2] for r in body] == [e[2] for e in EXPECTED]:
                scores["secondaries"] = 1.0
    except Exception:
        pass
    try:
        data = json.loads((out / "load.json").read_text(encoding="utf-8"))
        if {k: int(v) for k, v in data.items()} == LOAD:
            scores["load"] = 1.0
    except Exception:
        pass
    return scores
