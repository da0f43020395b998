"""Real-episode attacks on grading: a scripted policy drives the real custom harness through
``run_benchmark`` (the ``bench run`` code path) on shipped tasks, in real sandboxes.

Every attack must end with the run finished, the attempt recorded, and a score of 0 (the task's
do-nothing floor) or an error record; never with the forged verdict.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from clawgym_env.results import AttemptResult
from clawgym_env.runner import RunConfig, RunSummary, run_benchmark
from tests.clawgym_env.sandbox.conftest import backend  # noqa: F401  (bwrap; docker under its marker)
from tests.conftest import shared_data_dir

REPO = Path(__file__).resolve().parents[2]
ORIGINAL = REPO / "tasks" / "clawgym-original"

ANCESTORS = """
chain, pid = [], os.getppid()
while pid > 1 and len(chain) < 8:
    chain.append(pid)
    try:
        pid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
    except Exception:
        break
"""
"""Attack-script snippet: ``chain`` = the pids above this process (the grader first)."""


def bash(cmd: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": cmd}}]}


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write", "arguments": {"path": path, "content": content}}]}


def digest(folder: Path) -> str:
    """A hash of every file under ``folder`` (to prove hidden files were not touched)."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="session")
def clawgym_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real ClawGym sample tasks (task_0000: do-nothing floor 0), imported as a user would."""
    from clawgym_env.authoring.importers import import_suite

    src = tmp_path_factory.mktemp("cg-src")
    shutil.copytree(shared_data_dir() / "clawgym-sample" / "task_0000", src / "task_0000")
    return import_suite("clawgym", src, "cg-attack", tmp_path_factory.mktemp("cg-suite")).path


Attack = Callable[..., Any]


@pytest.fixture
def attack(tmp_path: Path) -> Attack:
    """``await attack(suite, task, replies, backend)`` -> (summary, the one attempt record).

    The run grades as training does (on bwrap the final workspace's layers, no copy); ``save=True``
    also saves the final workspace (``--save-workspaces``: then it is copied out and graded from the copy)."""
    runs: list[Path] = []

    async def run(
        suite: Path, task: str, replies: list[Any], backend: str, final: str = "done", save: bool = False
    ) -> tuple[RunSummary, AttemptResult]:
        runs.append(tmp_path / f"run{len(runs)}")
        out = runs[-1]
        out.mkdir()
        policy = out.with_suffix(".policy.yaml")
        policy.write_text(yaml.safe_dump({"replies": [*replies, final], "default": final}))
        summary = await run_benchmark(
            RunConfig(
                model=f"scripted:{policy}",
                harnesses=["custom"],
                suite=str(suite),
                tasks=task,
                sandbox=backend,
                out=str(out),
                save_workspaces=save,
                concurrency=1,
            ),
            progress=False,
        )
        (record,) = summary.attempts
        files = list((out / "attempts").glob("*.json"))
        assert len(files) == 1 and AttemptResult.model_validate_json(files[0].read_text()) == record
        return summary, record

    return run


def saved_workspace(summary: RunSummary) -> Path:
    (ws,) = (summary.out_dir / "workspaces").iterdir()
    return ws


def forged_scores(*keys: str) -> str:
    return json.dumps({"ok": True, "scores": dict.fromkeys(keys, 1.0)})


async def honest_score(suite: Path, task: str, files: dict[str, str], backend: str) -> float:
    """What the task's verifiers give a workspace holding ``files`` (no attack): the baseline an
    attack must not raise."""
    from clawgym_env.grading import grade_workspace, make_transcript
    from clawgym_env.task import load_suite

    spec = load_suite(suite).get(task)
    work = Path(tempfile.mkdtemp(prefix="clawgym-honest-"))
    try:
        if spec.workspace_dir is not None:
            shutil.copytree(spec.workspace_dir, work, dirs_exist_ok=True)
        for rel, text in files.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        return (await grade_workspace(spec, work, make_transcript(spec, "done"), backend)).score
    finally:
        shutil.rmtree(work, ignore_errors=True)
