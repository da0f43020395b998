"""Grader for smoke-count-lines: input/words.txt has 7 lines."""
from pathlib import Path

EXPECTED = 7


def grade(transcript, workspace_path):
    scores = {"file_exists": 0.0, "count_correct": 0.0}
    path = Path(workspace_path) / "count.txt"
    if not path.is_file():
        return scores
    try:
        if int(path.read_text(encoding="utf-8").strip()) == EXPECTED:
            scores["count_correct"] = 1.0
    except Exception:
        pass
    scores["file_exists"] = scores["count_correct"]  # any count.txt is not half a count
    return scores
