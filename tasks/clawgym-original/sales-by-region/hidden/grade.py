"""Grader for sales-by-region: precomputed totals; stray spaces in region names must be merged."""
import csv
from pathlib import Path

EXPECTED = [("Central", 7611.85, 20), ("East", 4776.36, 16), ("West", 3866.49, 8),
            ("North", 3325.36, 7), ("South", 3301.6, 10)]


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"regions": 0.0, "revenue": 0.0, "orders": 0.0, "sorted": 0.0, "top_product": 0.0}
    try:
        with open(out / "region_totals.csv", newline="", encoding="utf-8") as f:
            rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
        assert rows[0] == ["region", "revenue", "orders"]
        body = rows[1:]
        got = {r[0]: r for r in body}
        if len(body) == len(EXPECTED) and set(got) == {e[0] for e in EXPECTED}:
            scores["regions"] = 1.0
            if all(abs(float(got[n][1]) - v) < 0.006 for n, v, _ in EXPECTED):
                scores["revenue"] = 1.0
            if all(int(got[n][2]) == c for n, _, c in EXPECTED):
                scores["orders"] = 1.0
            if [r[0] for r in body] == [e[0] for e in EXPECTED]:
                scores["sorted"] = 1.0
    except Exception:
        pass
    try:
        if (out / "top_product.txt").read_text(encoding="utf-8").strip().lower() == "mixer":
            scores["top_product"] = 1.0
    except Exception:
        pass
    return scores
