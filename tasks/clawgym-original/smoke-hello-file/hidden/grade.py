"""Grader for smoke-hello-file: file name and text are read back from the rendered instruction."""
import re
from pathlib import Path


def _expected(transcript):
    m = re.search(r'file named (\S+) in the workspace root containing exactly the text "([^"]*)"',
                  str(transcript.get("instruction", "")))
    return (m.group(1), m.group(2)) if m else ("hello.txt", "hello world")


def grade(transcript, workspace_path):
    scores = {"file_exists": 0.0, "content_exact": 0.0}
    name, text = _expected(transcript)
    path = Path(workspace_path) / name
    if not path.is_file():
        return scores
    try:
        if path.read_text(encoding="utf-8").rstrip("\n") == text:
            scores["content_exact"] = 1.0
    except Exception:
        pass
    scores["file_exists"] = scores["content_exact"]  # an empty file earns nothing
    return scores
