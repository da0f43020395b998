"""Grader for log-error-summary: counts by level, not by the word "error" in a message."""
import json
from pathlib import Path

COUNTS = {"api": 3, "db": 4, "worker": 1}
FIRST = "2026-11-20T08:01:12Z"


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"components": 0.0, "counts": 0.0, "first_error": 0.0}
    try:
        data = json.loads((out / "errors.json").read_text(encoding="utf-8"))
        keys = {str(k).strip("[]") for k in data}
        if keys == set(COUNTS):
            scores["components"] = 1.0
            if all(int(data.get(k, data.get(f"[{k}]"))) == v for k, v in COUNTS.items()):
                scores["counts"] = 1.0
    except Exception:
        pass
    try:
        if (out / "first_error.txt").read_text(encoding="utf-8").strip() == FIRST:
            scores["first_error"] = 1.0
    except Exception:
        pass
    return scores
