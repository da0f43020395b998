"""Grader for smoke-python-hello: runs the named script in the grading jail and compares stdout with the instruction's message."""
import re
from pathlib import Path

from clawgym_grading import run_agent


def _expected(transcript):
    m = re.search(r"script named (\S+) in the workspace root that prints exactly: (.+)",
                  str(transcript.get("instruction", "")))
    return (m.group(1), m.group(2).strip()) if m else ("hello.py", "Hello from ClawGym")


def grade(transcript, workspace_path):
    scores = {"script_exists": 0.0, "prints_message": 0.0}
    name, message = _expected(transcript)
    script = Path(workspace_path) / name
    if not script.is_file():
        return scores
    try:
        out = run_agent(["python3", str(script)], workspace_path, timeout=20)
        if out.returncode == 0 and out.stdout.strip() == message:
            scores["prints_message"] = 1.0
    except Exception:
        pass
    scores["script_exists"] = scores["prints_message"]  # an empty script earns nothing
    return scores
