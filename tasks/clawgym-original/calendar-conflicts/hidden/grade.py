"""Grader for calendar-conflicts: time-zone aware overlaps, with touching meetings as traps."""
import json
from pathlib import Path

CONFLICTS = [("omar", "ev01", "ev02"), ("omar", "ev02", "ev06"), ("pia", "ev05", "ev07"),
             ("quinn", "ev03", "ev04"), ("quinn", "ev09", "ev10")]
HOURS = {"nadia": 3.25, "omar": 3.5, "pia": 3.25, "quinn": 6.0}


def _load(path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except Exception:
        return None


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"all_conflicts_found": 0.0, "no_false_conflicts": 0.0, "sorted": 0.0, "hours": 0.0}
    data = _load(out / "conflicts.json")
    try:
        got = [(str(d["person"]), str(d["a"]), str(d["b"])) for d in data]
        found = set(got) & set(CONFLICTS)
        if found == set(CONFLICTS):
            scores["all_conflicts_found"] = 1.0
        if found and set(got) <= set(CONFLICTS) and len(got) == len(set(got)):
            scores["no_false_conflicts"] = 1.0
        if got == CONFLICTS:
            scores["sorted"] = 1.0
    except Exception:
        pass
    hours = _load(out / "hours.json")
    try:
        if set(hours) == set(HOURS) and all(abs(float(hours[k]) - v) < 0.01 for k, v in HOURS.items()):
            scores["hours"] = 1.0
    except Exception:
        pass
    return scores
