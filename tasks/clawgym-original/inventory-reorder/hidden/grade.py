"""Grader for inventory-reorder: WP-400 sits exactly at its reorder point and must be included."""
import csv
from pathlib import Path

EXPECTED = {"GZ-600": 475, "MK-220": 1250, "SN-310": 204, "TB-510": 50, "WP-400": 768}


def grade(transcript, workspace_path):
    scores = {"right_items": 0.0, "quantities": 0.0, "pack_multiples_sorted": 0.0}
    try:
        with open(Path(workspace_path) / "output" / "reorder.csv", newline="", encoding="utf-8") as f:
            rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
        assert rows[0] == ["sku", "order_qty"]
        body = rows[1:]
    except Exception:
        return scores
    try:
        got = {r[0]: int(float(r[1])) for r in body}
        if set(got) == set(EXPECTED) and len(body) == len(EXPECTED):
            scores["right_items"] = 1.0
        if got == EXPECTED:
            scores["quantities"] = 1.0
            if [r[0] for r in body] == sorted(EXPECTED):
                scores["pack_multiples_sorted"] = 1.0
    except Exception:
        pass
    return scores
