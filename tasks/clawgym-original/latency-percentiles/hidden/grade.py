"""Grader for latency-percentiles: nearest-rank percentiles without 5xx requests (interpolation gives other values)."""
import csv
from pathlib import Path

EXPECTED = {
    "/api/checkout": (62, 232.0, 579.5, 830.2),
    "/api/login": (69, 77.9, 190.7, 282.3),
    "/api/search": (46, 125.5, 683.0, 1255.4),
    "/healthz": (54, 3.0, 5.8, 5.9),
}
BREACHES = ["/api/login", "/api/search"]


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"counts_without_5xx": 0.0, "p50": 0.0, "p95_p99": 0.0, "sorted_rows": 0.0, "slo_breaches": 0.0}
    try:
        with open(out / "latency.csv", newline="", encoding="utf-8") as f:
            rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
        assert rows[0] == ["route", "count", "p50", "p95", "p99"]
        got = {r[0]: r[1:5] for r in rows[1:]}
        if set(got) == set(EXPECTED):
            close = lambda i: all(abs(float(got[k][i]) - v[i]) < 0.01 for k, v in EXPECTED.items())
            scores["counts_without_5xx"] = 1.0 if all(int(got[k][0]) == v[0] for k, v in EXPECTED.items()) else 0.0
            scores["p50"] = 1.0 if close(1) else 0.0
            scores["p95_p99"] = 1.0 if close(2) and close(3) else 0.0
            scores["sorted_rows"] = 1.0 if [r[0] for r in rows[1:]] == sorted(EXPECTED) else 0.0
    except Exception:
        pass
    try:
        lines = [ln.strip() for ln in (out / "slo_breaches.txt").read_text(encoding="utf-8").splitlines() if ln.strip()]
        if lines == BREACHES:
            scores["slo_breaches"] = 1.0
    except Exception:
        pass
    return scores
