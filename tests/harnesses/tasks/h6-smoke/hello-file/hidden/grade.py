"""hello.txt must exist and hold exactly "hello world" (a trailing newline is fine)."""

from pathlib import Path


def grade(transcript, workspace_path):
    path = Path(workspace_path) / "hello.txt"
    exists = path.is_file()
    exact = exists and path.read_text(encoding="utf-8").rstrip("\n") == "hello world"
    return {"file_exists": float(exact), "content_exact": float(exact)}  # an empty hello.txt earns nothing
