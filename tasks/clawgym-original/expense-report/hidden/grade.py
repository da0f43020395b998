"""Grader for expense-report: the month comes from the rendered instruction; totals are precomputed."""
import json
import re
from pathlib import Path

EXPECTED = {
    "2026-09": {"total_eur": 1398.02,
                "by_category": {"travel": 722.55, "meals": 110.63, "software": 156.39, "lodging": 408.45},
                "by_employee": {"amira": 870.63, "bruno": 394.24, "chen": 133.15}},
    "2026-10": {"total_eur": 1228.07,
                "by_category": {"travel": 280.88, "meals": 131.19, "lodging": 540.0, "software": 276.0},
                "by_employee": {"chen": 494.97, "amira": 174.2, "bruno": 558.9}},
}


def _month(transcript):
    m = re.search(r"expense summary for (\d{4}-\d{2})", str(transcript.get("instruction", "")))
    return m.group(1) if m and m.group(1) in EXPECTED else "2026-09"


def _close(got, want):
    try:
        return set(got) == set(want) and all(abs(float(got[k]) - v) <= 0.031 for k, v in want.items())
    except Exception:
        return False


def grade(transcript, workspace_path):
    month = _month(transcript)
    want = EXPECTED[month]
    scores = {"valid_json": 0.0, "total": 0.0, "by_category": 0.0, "by_employee": 0.0}
    try:
        data = json.loads((Path(workspace_path) / "output" / f"expenses-{month}.json").read_text(encoding="utf-8"))
    except Exception:
        return scores
    if isinstance(data, dict) and data.get("month") == month:
        scores["valid_json"] = 1.0
    else:
        return scores
    try:
        if abs(float(data.get("total_eur")) - want["total_eur"]) <= 0.031:
            scores["total"] = 1.0
    except Exception:
        pass
    scores["by_category"] = 1.0 if _close(data.get("by_category") or {}, want["by_category"]) else 0.0
    scores["by_employee"] = 1.0 if _close(data.get("by_employee") or {}, want["by_employee"]) else 0.0
    return scores
