"""Grader for meeting-action-items: checks the extracted rows, their order and the per-owner counts."""
import csv
import json
from pathlib import Path

EXPECTED = [
    ("ines", "Book a follow-up with the data team", "2026-11-06", "2026-11-04-design-review"),
    ("kofi", "Clean up old staging snapshots", "2026-11-06", "2026-11-02-planning"),
    ("mara", "Share retro notes with the wider team", "2026-11-06", "2026-11-05-retro"),
    ("kofi", "Quarantine the three flaky integration tests", "2026-11-09", "2026-11-05-retro"),
    ("devraj", "Update the export API spec with pagination", "2026-11-10", "2026-11-04-design-review"),
    ("mara", "Draft the Q1 roadmap one-pager", "2026-11-13", "2026-11-02-planning"),
]
COUNTS = {"ines": 1, "kofi": 2, "mara": 2, "devraj": 1}


def _norm(row):
    return tuple(c.strip() for c in row)


def grade(transcript, workspace_path):
    ws = Path(workspace_path)
    scores = {"header": 0.0, "all_items_found": 0.0, "fields_exact": 0.0, "sorted": 0.0, "owner_counts": 0.0}
    try:
        with open(ws / "output" / "actions.csv", newline="", encoding="utf-8") as f:
            rows = [r for r in csv.reader(f) if r]
        body = [_norm(r) for r in rows[1:]]
        if len(body) == len(EXPECTED) and {r[2] + r[0] for r in body if len(r) == 4} == {e[2] + e[0] for e in EXPECTED}:
            scores["all_items_found"] = 1.0
            # the header is given in the instruction: it counts once the rows under it are the right items
            if [h.strip() for h in rows[0]] == ["owner", "task", "due", "meeting"]:
                scores["header"] = 1.0
        if sorted(body) == sorted(EXPECTED):
            scores["fields_exact"] = 1.0
            if body == EXPECTED:
                scores["sorted"] = 1.0
    except Exception:
        pass
    try:
        data = json.loads((ws / "output" / "by_owner.json").read_text(encoding="utf-8"))
        if {str(k).lstrip("@"): int(v) for k, v in data.items()} == COUNTS:
            scores["owner_counts"] = 1.0
    except Exception:
        pass
    return scores
