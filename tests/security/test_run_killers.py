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

from clawgym_env.runner import RunConfig, run_benchmark
from clawgym_env.runner.folder import load_attempts
from tests.security.conftest import REPO, write

OFFICEQA = REPO / "tasks" / "officeqa-mini"
RUN_KILLER = "<answer>1" + " " * 40_000 + "x</answer>"
"""Before the fix, reading this as a number took longer than any test would wait (a minute at 2,000 spaces)."""


@pytest.mark.sandbox
def test_a_pathological_answer_scores_0_and_the_run_goes_on(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "rules": [  # matched on the instruction, the first call's last message; then "done"
                    {"match": "Brandholm", "reply": write("output/answer.txt", RUN_KILLER)},
                    {"match": "Public\\s+Transit", "reply": write("output/answer.txt", "<answer>231.0 million</answer>")},
                    {"match": "Norrvik", "reply": "Net sales grew <answer>16.5%</answer>"},
                ],
                "default": "done",
            }
        )
    )
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "clawgym_env.cli.main",
        "bench",
        "run",
        "--model",
        f"scripted:{policy}",
        "--harness",
        "custom",
        "--suite",
        str(OFFICEQA),
        "--tasks",
        "[cdn]*",
        "--sandbox",
        "bwrap",
        "--concurrency",
        "3",
        "--out",
        str(out),
        "--no-progress",
    ]
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


GRADE_SHOWING_OUTPUT = """
import sys
from clawgym_grading import run_agent

def grade(transcript, workspace_path):
    run = run_agent(["python3", "answer.py"], workspace_path, timeout=60)
    print(run.stdout)  # what the agent's code printed, shown as graders do for debugging
    print(run.stderr, file=sys.stderr)
    return {"done": float(run.stdout.strip().endswith("done"))}
"""
FLOOD = "import sys\nfor _ in range(2_000_000):\n    print('flood ' * 3, flush=True); print('flood', file=sys.stderr, flush=True)\n"
"""Tens of MiB on both streams, one write per line: as many frames on docker."""


def _suite_showing_output(root: Path) -> Path:
    root.mkdir()
    (root / "suite.yaml").write_text("name: graders-showing-output\npass_threshold: 1.0\n")
    for name in ("flood", "quiet"):
        task = root / name
        (task / "hidden").mkdir(parents=True)
        (task / "hidden" / "grade.py").write_text(GRADE_SHOWING_OUTPUT)
        (task / "task.yaml").write_text(
            yaml.safe_dump(
                {
                    "id": name,
                    "version": 1,
                    "instruction": f"Task {name}: write answer.py, which prints done.",
                    "hidden": "hidden",
                    "verifiers": [{"kind": "code", "file": "hidden/grade.py", "timeout_s": 120}],
                    "limits": {"wall_time_s": 120, "model_calls": 4, "memory_mb": 1024},
                }
            )
        )
    return root


@pytest.mark.sandbox
@pytest.mark.docker
async def test_agent_code_flooding_its_graders_output(tmp_path: Path) -> None:
    """A grader that prints what the agent's code printed puts tens of MiB on the grading process's output
    (on docker: millions of stream frames). The flooding attempt is recorded at 0 and an honest attempt of
    the same run, graded alongside, passes. (bwrap reads its pipes in 64 KiB: the same run took 16 s there.)"""
    backend = "docker"
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "rules": [
                    {"match": "Task flood", "reply": write("answer.py", FLOOD)},
                    {"match": "Task quiet", "reply": write("answer.py", "print('done')\n")},
                ],
                "default": "done",
            }
        )
    )
    summary = await run_benchmark(
        RunConfig(
            model=f"scripted:{policy}",
            harnesses=["custom"],
            suite=str(_suite_showing_output(tmp_path / "graders-showing-output")),
            sandbox=backend,
            out=str(tmp_path / "run"),
            concurrency=2,
        ),
        progress=False,
    )
    by_task = {a.task_id.rsplit("/", 1)[1]: a for a in summary.attempts}
    assert (by_task["quiet"].status, by_task["quiet"].score) == ("passed", 1.0), by_task["quiet"].error
    flood = by_task["flood"]
    assert flood.score == 0.0 and flood.status == "failed", (flood.status, flood.error)
