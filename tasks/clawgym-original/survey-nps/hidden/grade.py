"""Grader for survey-nps: precomputed NPS figures (blank and n/a scores excluded)."""
import json
from pathlib import Path

SEGMENTS = {"enterprise": 16.7, "smb": 46.2, "self-serve": 45.5}
DETRACTORS = ["R019", "R022", "R028", "R031", "R041"]


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"valid_responses": 0.0, "overall_nps": 0.0, "segment_nps": 0.0, "detractors": 0.0}
    try:
        data = json.loads((out / "nps.json").read_text(encoding="utf-8"))
        if int(data["responses"]) == 36:
            scores["valid_responses"] = 1.0
        if abs(float(data["overall"]) - 36.1) < 0.051:
            scores["overall_nps"] = 1.0
        seg = data["by_segment"]
        if set(seg) == set(SEGMENTS) and all(abs(float(seg[k]) - v) < 0.051 for k, v in SEGMENTS.items()):
            scores["segment_nps"] = 1.0
    except Exception:
        pass
    try:
        got = [ln.strip() for ln in (out / "detractors.txt").read_text(encoding="utf-8").splitlines() if ln.strip()]
        if got == DETRACTORS:
            scores["detractors"] = 1.0
    except Exception:
        pass
    return scores
