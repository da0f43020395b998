"""Grader for i18n-audit: nested keys as dotted paths, placeholder sets compared per key."""
import csv
import json
from pathlib import Path

REPORT = {
    "de": {"missing": ["auth.errors.locked", "settings.theme.light"], "extra": ["notes.archive"],
           "placeholder_mismatch": ["auth.welcome"]},
    "fr": {"missing": ["notes.empty"], "extra": ["settings.beta.label"], "placeholder_mismatch": ["notes.shared_by"]},
}
COVERAGE = [("de", 12, 14, 85.7), ("fr", 13, 14, 92.9)]


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"missing": 0.0, "extra": 0.0, "placeholder_mismatch": 0.0, "coverage": 0.0}
    try:
        data = json.loads((out / "i18n_report.json").read_text(encoding="utf-8"))
        if set(data) == set(REPORT):
            for key in ("missing", "extra", "placeholder_mismatch"):
                if all([str(x) for x in data[lang].get(key, [])] == REPORT[lang][key] for lang in REPORT):
                    scores[key] = 1.0
    except Exception:
        pass
    try:
        with open(out / "coverage.csv", newline="", encoding="utf-8") as f:
            rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
        assert rows[0] == ["language", "translated", "total", "percent"]
        body = rows[1:]
        if len(body) == len(COVERAGE) and all(
            r[0] == lang and int(r[1]) == t and int(r[2]) == n and abs(float(r[3]) - p) < 0.051
            for r, (lang, t, n, p) in zip(body, COVERAGE)
        ):
            scores["coverage"] = 1.0
    except Exception:
        pass
    return scores
