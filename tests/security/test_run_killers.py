"""Run killers: an attempt must not stop the other attempts of its run.

Every attempt of a run is graded on one event loop in the host process. An answer built to make
host-side parsing super-linear (a digit, tens of thousands of spaces, a letter: the number
pattern used to take cubic time in the run of spaces) held that loop for hours; no timeout could
fire, every other episode waited, and the run was killed from outside with nothing recorded. Here
one such attempt runs beside honest ones through ``clawgym bench run``, real
custom harness, real bwrap sandboxes: it scores 0 and the others finish and pass.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clawgym_env.runner.folder import load_attempts
from tests.security.conftest import REPO, write

OFFICEQA = REPO / "tasks" / "officeqa-mini"
RUN_KILLER = "<answer>1" + " " * 40_000 + "x</answer>"
"""Before the fix, reading this as a number took longer than any test would wait (a minute at 2,000 spaces)."""


@pytest.mark.sandbox
def test_a_pathological_answer_scores_0_and_the_run_goes_on(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({
        "rules": [  # matched on the instruction, the first call's last message; then "done"
            {"match": "Brandholm", "reply": write("output/answer.txt", RUN_KILLER)},
            {"match": "Public\\s+Transit", "reply": write("output/answer.txt", "<answer>231.0 million</answer>")},
            {"match": "Norrvik", "reply": "Net sales grew <answer>16.5%</answer>"},
        ],
        "default": "done",
    }))
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "clawgym_env.cli.main", "bench", "run", "--model", f"scripted:{policy}",
           "--harness", "custom", "--suite", str(OFFICEQA), "--tasks", "[cdn]*", "--sandbox", "bwrap",
           "--concurrency", "3", "--out", str(out), "--no-progress"]
    try:  # a process of its own: a stalled event loop lets no timeout inside it fire, pytest's included
        subprocess.run(cmd, cwd=REPO, capture_output=True, timeout=240, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run stalled: {len(load_attempts(out))} of 3 attempts recorded after 240 s")
    by_task = {a.task_id.rsplit("/", 1)[1]: a for a in load_attempts(out)}
    assert sorted(by_task) == ["city-transit-spend", "division-backlog", "norrvik-sales-growth"]
    killer = by_task["division-backlog"]
    assert (killer.status, killer.score, killer.episode_status) == ("failed", 0.0, "completed"), killer.error
    for honest in ("city-transit-spend", "norrvik-sales-growth"):
        assert (by_task[honest].status, by_task[honest].score) == ("passed", 1.0), by_task[honest].error
