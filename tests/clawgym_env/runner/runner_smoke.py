"""The smoke suite and scripted policy shared by the end-to-end runner tests."""

from __future__ import annotations

import shutil
from pathlib import Path

POLICY = Path(__file__).parent / "smoke_policy.yaml"
SUITE_SRC = Path(__file__).resolve().parents[3] / "tasks" / "clawgym-original"
# What the graders of clawgym-original/smoke-* give the scripted policy (smoke_policy.yaml).
EXPECTED = {
    "clawgym-original/smoke-copy-file": (1.0, {"code/file_exists": 1.0, "code/content_matches": 1.0}),
    "clawgym-original/smoke-count-lines": (0.0, {"code/file_exists": 0.0, "code/count_correct": 0.0}),
    "clawgym-original/smoke-hello-file-p0": (1.0, {"code/file_exists": 1.0, "code/content_exact": 1.0}),
    "clawgym-original/smoke-hello-file-p1": (1.0, {"code/file_exists": 1.0, "code/content_exact": 1.0}),
    "clawgym-original/smoke-python-hello-p0": (1.0, {"code/script_exists": 1.0, "code/prints_message": 1.0}),
    "clawgym-original/smoke-python-hello-p1": (0.0, {"code/script_exists": 0.0, "code/prints_message": 0.0}),
}


def copy_smoke_suite(dest: Path) -> Path:
    """The smoke tasks alone, copied: other tasks being edited in the repo cannot change this run."""
    suite = dest / "clawgym-original"
    suite.mkdir(parents=True)
    shutil.copy(SUITE_SRC / "suite.yaml", suite / "suite.yaml")
    for t in SUITE_SRC.glob("smoke-*"):
        shutil.copytree(t, suite / t.name)
    return suite
