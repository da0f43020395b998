"""Grader for smoke-copy-file: the copy must match the original sentence."""
from pathlib import Path

EXPECTED = "Simple tools, used well, beat clever tools used badly."


def grade(transcript, workspace_path):
    scores = {"file_exists": 0.0, "content_matches": 0.0}
    path = Path(workspace_path) / "output" / "quote.txt"
    if not path.is_file():
        return scores
    try:
        if path.read_text(encoding="utf-8").strip() == EXPECTED:
            scores["content_matches"] = 1.0
    except Exception:
        pass
    scores["file_exists"] = scores["content_matches"]  # existing alone earns nothing (an empty file is not a copy)
    return scores
