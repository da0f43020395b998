"""Grader for inbox-triage: one sub-score per folder, so rule-order mistakes show up where they happen."""
import json
from pathlib import Path

EXPECTED = {
    "urgent": ["m01", "m04", "m07", "m08"],
    "billing": ["m02", "m06", "m11"],
    "newsletter": ["m03", "m09", "m10"],
    "other": ["m05", "m12"],
}


def grade(transcript, workspace_path):
    scores = {k: 0.0 for k in EXPECTED}
    try:
        data = json.loads((Path(workspace_path) / "output" / "triage.json").read_text(encoding="utf-8"))
    except Exception:
        return scores
    if not isinstance(data, dict):
        return scores
    for folder, ids in EXPECTED.items():
        got = data.get(folder)
        if isinstance(got, list) and [str(x) for x in got] == ids:
            scores[folder] = 1.0
    return scores
