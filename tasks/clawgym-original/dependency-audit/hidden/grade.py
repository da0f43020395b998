"""Grader for dependency-audit: numeric version comparison (lxml 4.9.10 is safe), boundaries exclusive."""
import csv
from pathlib import Path

EXPECTED = [
    ("django", "3.2.19", "ADV-101", "3.2.20"),
    ("jinja2", "3.1.2", "ADV-501", "3.1.3"),
    ("jinja2", "3.1.2", "ADV-502", "3.1.4"),
    ("pyyaml", "5.3.1", "ADV-401", "5.4"),
    ("requests", "2.28.2", "ADV-201", "2.31.0"),
]
FALSE_FRIENDS = {"ADV-301", "ADV-402", "ADV-601", "ADV-801", "ADV-102", "ADV-701"}


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"all_vulnerabilities_found": 0.0, "no_false_positives": 0.0, "rows_exact": 0.0, "unpinned": 0.0}
    try:
        with open(out / "vulnerable.csv", newline="", encoding="utf-8") as f:
            rows = [tuple(c.strip() for c in r) for r in csv.reader(f) if r]
        assert rows[0] == ("package", "installed", "advisory", "fixed_in")
        body = rows[1:]
        ids = {r[2] for r in body if len(r) == 4}
        if {e[2] for e in EXPECTED} <= ids:
            scores["all_vulnerabilities_found"] = 1.0
        # precision counts on full recall: any invented or single sure id has no false positive
        if scores["all_vulnerabilities_found"] and ids <= {e[2] for e in EXPECTED} and len(body) == len(ids):
            scores["no_false_positives"] = 1.0
        if body == EXPECTED:
            scores["rows_exact"] = 1.0
    except Exception:
        pass
    try:
        lines = [ln.strip() for ln in (out / "unpinned.txt").read_text(encoding="utf-8").splitlines() if ln.strip()]
        if lines == ["cryptography", "setuptools"]:
            scores["unpinned"] = 1.0
    except Exception:
        pass
    return scores
