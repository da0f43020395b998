"""Grader for sprint-capacity: Farid's days off exceed the sprint, so his capacity is 0, not negative."""
import json
from pathlib import Path

PERSON = {"Aiko": 10.8, "Bram": 8.4, "Celia": 10.1, "Dmitri": 4.2, "Esme": 7.2, "Farid": 0.0}
ROLE = {"backend": 19.2, "frontend": 14.3, "qa": 7.2}
TOTAL = 40.7


def _match(got, want):
    return isinstance(got, dict) and set(got) == set(want) and all(abs(float(got[k]) - v) < 0.051 for k, v in want.items())


def grade(transcript, workspace_path):
    scores = {"by_person": 0.0, "by_role": 0.0, "total": 0.0}
    try:
        data = json.loads((Path(workspace_path) / "output" / "capacity.json").read_text(encoding="utf-8"))
    except Exception:
        return scores
    for key, want in (("by_person", PERSON), ("by_role", ROLE)):
        try:
            scores[key] = 1.0 if _match(data.get(key), want) else 0.0
        except Exception:
            pass
    try:
        scores["total"] = 1.0 if abs(float(data["total"]) - TOTAL) < 0.051 else 0.0
    except Exception:
        pass
    return scores
