"""The procgen suites: committed folders equal the generator's output, splits share no parameter,
graders give 1.0 only to the exact end state, and the reference solutions pass in real sandboxes."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clawgym_env.task import load_suite
from clawgym_env.task.check import check_suite
from clawgym_env.task.procgen import TEMPLATES, generate, write_suites
from clawgym_env.task.suite import content_hash, repo_tasks_dir


def _flat(value: Any) -> set[str]:
    if isinstance(value, list):
        return {str(v) for v in value}
    return {str(value)}


def test_committed_suites_are_the_generators_output(tmp_path: Path) -> None:
    for written in write_suites(tmp_path):
        assert content_hash(written) == content_hash(repo_tasks_dir() / written.name), (
            f"tasks/{written.name} differs from the generator: run `python -m clawgym_env.task.procgen`")


def test_train_and_test_share_no_parameter_value() -> None:
    train, test = generate("train"), generate("test")
    assert len(train) == 12 * len(TEMPLATES) and len(test) == 2 * len(TEMPLATES)
    for name in TEMPLATES:
        seen = {k: set() for k in ("train", "test")}
        for split, variants in (("train", train), ("test", test)):
            for _, v in variants:
                if v.template == name:
                    for value in v.params.values():
                        seen[split] |= _flat(value)
        assert seen["train"] and seen["test"] and not seen["train"] & seen["test"], name
    key = lambda v: v.instruction + json.dumps(v.workspace, sort_keys=True)  # noqa: E731
    assert not {key(v) for _, v in train} & {key(v) for _, v in test}  # data-only templates share the wording


def _grade(task_dir: Path, workspace: Path) -> float:
    spec = importlib.util.spec_from_file_location("procgen_grade", task_dir / "hidden" / "grade.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    scores = mod.grade({"instruction": ""}, str(workspace))
    assert set(scores) == {"correct"}
    return scores["correct"]


def _checks(task_dir: Path) -> list[dict[str, Any]]:
    text = (task_dir / "hidden" / "grade.py").read_text()
    return json.loads(eval(text.split("CHECKS = json.loads(", 1)[1].split(")\n", 1)[0]))  # the embedded literal


def test_graders_are_strict_one_near_miss_per_check(tmp_path: Path) -> None:
    suite = load_suite("procgen-test")
    for task in suite.tasks:
        ws = tmp_path / task.id
        shutil.copytree(task.workspace_dir, ws) if task.workspace_dir else ws.mkdir()
        assert _grade(task.task_dir, ws) == 0.0, f"{task.id}: do-nothing must score 0"
        subprocess.run(["bash", str(task.solution_path)], cwd=ws, check=True)
        assert _grade(task.task_dir, ws) == 1.0, f"{task.id}: the reference solution must score 1"
        for check in _checks(task.task_dir):  # break one check at a time: the score drops to 0
            miss = tmp_path / f"{task.id}-miss"
            shutil.rmtree(miss, ignore_errors=True)
            shutil.copytree(ws, miss)
            target = miss / check["path"]
            if check["op"] == "absent":
                target.write_text("back\n")
            elif check["op"] == "dir":
                target.rmdir()
            else:
                target.write_text(target.read_text() + "1\n")
            assert _grade(task.task_dir, miss) == 0.0, f"{task.id}: near miss on {check} scored 1"


@pytest.mark.sandbox
async def test_reference_solutions_pass_and_noop_scores_zero_in_bwrap() -> None:
    suite = load_suite("procgen-test")
    one_each = [next(t for t in suite.tasks if t.id.startswith(name)) for name in TEMPLATES]
    results = await check_suite(one_each, "bwrap", concurrency=2)
    assert [r.problems for r in results if not r.ok] == []
    assert all(r.solution_score == 1.0 and r.noop_score == 0.0 for r in results)
