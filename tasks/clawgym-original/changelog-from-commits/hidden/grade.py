"""Grader for changelog-from-commits: semver bump plus exact, ordered entries per section."""
from pathlib import Path

SECTIONS = [
    ("### Breaking Changes", ["- drop support for API keys in query strings (c0ffee1)",
                              "- **api:** return 404 instead of 200 for unknown order ids (f00dbab)"]),
    ("### Features", ["- **api:** add cursor pagination to /orders (9f3c2a1)",
                      "- **ui:** dark mode toggle in settings (0a9b8c7)"]),
    ("### Bug Fixes", ["- **auth:** refresh tokens no longer expire early (1b7e44c)",
                       "- handle empty cart on checkout (a1b2c3d)"]),
    ("### Performance", ["- **db:** add index on orders.created_at (e5d4c3b)"]),
]


def _parse(lines):
    out, current = {}, None
    for ln in lines:
        s = ln.rstrip()
        if s.startswith("### "):
            current = s
            out[current] = []
        elif s.startswith("- ") and current:
            out[current].append(s)
    return out


def grade(transcript, workspace_path):
    ws = Path(workspace_path)
    scores = {"version_bump": 0.0, "breaking_changes": 0.0, "features_and_fixes": 0.0,
              "performance_and_exclusions": 0.0, "section_order": 0.0}
    try:
        lines = (ws / "output" / "CHANGELOG.md").read_text(encoding="utf-8").splitlines()
    except Exception:
        return scores
    try:
        if (ws / "VERSION").read_text(encoding="utf-8").strip() == "3.0.0" and lines[0].strip() == "## 3.0.0":
            scores["version_bump"] = 1.0
    except Exception:
        pass
    got = _parse(lines)
    want = dict(SECTIONS)
    if got.get("### Breaking Changes") == want["### Breaking Changes"]:
        scores["breaking_changes"] = 1.0
    if got.get("### Features") == want["### Features"] and got.get("### Bug Fixes") == want["### Bug Fixes"]:
        scores["features_and_fixes"] = 1.0
    entries = [e for es in got.values() for e in es]
    if got.get("### Performance") == want["### Performance"] and len(entries) == 7:
        scores["performance_and_exclusions"] = 1.0
    # the order of headings is worth something only around the right entries
    if list(got) == [s for s, _ in SECTIONS] and scores["breaking_changes"] and scores["features_and_fixes"]:
        scores["section_order"] = 1.0
    return scores
