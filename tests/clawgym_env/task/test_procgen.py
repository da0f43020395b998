"""The procgen suites (one-command and multi-step): committed folders equal the generator's output, splits
share no parameter, graders give 1.0 only to the exact end state, and the reference solutions pass in
real sandboxes."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clawgym_env.authoring.check import check_suite
from clawgym_env.task import load_suite
from clawgym_env.task import procgen_compose as compose
from clawgym_env.task import procgen_multistep as multistep
from clawgym_env.task.procgen import RL_PER_TEMPLATE, TEMPLATES, generate, rl_variants, write_rl_suite, write_suites
from clawgym_env.task.suite import content_hash, repo_tasks_dir

GENERATORS = {"procgen": (TEMPLATES, 12, 2), multistep.PREFIX: (multistep.TEMPLATES, 8, 2), compose.PREFIX: (compose.TEMPLATES, 6, 3)}
"""Suite prefix -> (templates, train and test variants per template)."""


def _flat(value: Any) -> set[str]:
    if isinstance(value, list):
        return {str(v) for v in value}
    return {str(value)}


@pytest.mark.parametrize("prefix", GENERATORS)
def test_committed_suites_are_the_generators_output(tmp_path: Path, prefix: str) -> None:
    module = {"procgen": "procgen", multistep.PREFIX: "procgen_multistep", compose.PREFIX: "procgen_compose"}[prefix]
    writers = {"procgen": write_suites, multistep.PREFIX: multistep.write, compose.PREFIX: compose.write}
    for written in writers[prefix](tmp_path):
        assert content_hash(written) == content_hash(repo_tasks_dir() / written.name), (
            f"tasks/{written.name} differs from the generator: run `python -m clawgym_env.task.{module}`"
        )


@pytest.mark.parametrize("prefix", GENERATORS)
def test_train_and_test_share_no_parameter_value(prefix: str) -> None:
    templates, n_train, n_test = GENERATORS[prefix]
    train, test = generate("train", n_train, templates), generate("test", n_test, templates)
    assert len(train) == n_train * len(templates) and len(test) == n_test * len(templates)
    for name in templates:
        seen = {k: set() for k in ("train", "test")}
        for split, variants in (("train", train), ("test", test)):
            for _, v in variants:
                if v.template == name:
                    for value in v.params.values():
                        seen[split] |= _flat(value)
        assert seen["train"] and seen["test"] and not seen["train"] & seen["test"], name
    key = lambda v: v.instruction + json.dumps(v.workspace, sort_keys=True)  # noqa: E731
    assert not {key(v) for _, v in train} & {key(v) for _, v in test}  # data-only templates share the wording


def test_rl_suite_is_unseen_train_variants_disjoint_from_test(tmp_path: Path) -> None:
    """procgen-train-rl (RL, its probe, its validation): the train stream's next variants, so the SFT data
    (procgen-train) holds none of them, and their parameters come from the train pools only."""
    written = write_rl_suite(tmp_path)
    assert content_hash(written) == content_hash(repo_tasks_dir() / "procgen-train-rl"), (
        "tasks/procgen-train-rl differs from the generator: run `python -m clawgym_env.task.procgen`"
    )
    extra, train, test = rl_variants(), generate("train"), generate("test")
    assert len(extra) == RL_PER_TEMPLATE * len(TEMPLATES)
    assert {i.rsplit("-", 1)[1] for i, _ in extra} == {f"{n:02d}" for n in range(13, 13 + RL_PER_TEMPLATE)}
    assert [x for x in generate("train", 12 + RL_PER_TEMPLATE) if x not in extra] == train  # one stream: procgen-train is its start
    key = lambda v: v.instruction + json.dumps(v.workspace, sort_keys=True)  # noqa: E731
    assert not {key(v) for _, v in extra} & {key(v) for _, v in train + test}  # a variant SFT never saw, and not held-out
    test_values = {(v.template, x) for _, v in test for value in v.params.values() for x in _flat(value)}
    assert not {(v.template, x) for _, v in extra for value in v.params.values() for x in _flat(value)} & test_values
    assert {t.metadata["procgen"]["split"] for t in load_suite("procgen-train-rl").tasks} == {"train"}


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


def test_multistep_solutions_need_what_an_earlier_step_printed() -> None:
    """In every multi-step variant the later commands hold parameters the instruction does not say (the first finds them)."""
    for split in ("train", "test"):
        for task_id, v in generate(split, 2, compose.TEMPLATES):  # the multi-step templates and the compositions
            assert 2 <= len(v.steps) <= 3 and v.command == "\n".join(v.steps), task_id
            hidden = [str(x) for x in v.params.values() if str(x) not in v.instruction]
            assert hidden and all(any(x in step for step in v.steps[1:]) for x in hidden), (task_id, v.params, v.steps)
            assert not any(x in v.steps[0] for x in hidden), (task_id, v.steps)  # the first step finds it out


UNRELATED = ["true", "echo Done", "ls", "cat *", "echo 0 > count.txt", "touch count.txt value.txt total.txt sorted.txt head.txt errors.txt"]
"""Commands a policy emits without solving anything (RL would reward them on a grader they pass)."""


@pytest.mark.parametrize("name", ["procgen-train", "procgen-train-rl", "procgen-test"])
def test_no_unrelated_command_passes_a_grader(tmp_path: Path, name: str) -> None:
    """Every other template's reference command and the no-op / echo / touch commands score 0 on one variant per template."""
    tasks = load_suite(name).tasks
    first = {t.category: t for t in reversed(tasks)}
    for task in first.values():
        for cmd in [*(t.metadata["procgen"]["command"] for t in first.values() if t.category != task.category), *UNRELATED]:
            ws = tmp_path / "ws"
            shutil.rmtree(ws, ignore_errors=True)
            shutil.copytree(task.workspace_dir, ws) if task.workspace_dir else ws.mkdir()
            subprocess.run(["bash", "-c", cmd], cwd=ws, capture_output=True, timeout=30)
            assert _grade(task.task_dir, ws) == 0.0, f"{task.full_id}: {cmd!r} passes"


@pytest.mark.parametrize("name", ["procgen-test", "procgen-multistep-test", "procgen-compose-test"])
def test_graders_are_strict_one_near_miss_per_check(tmp_path: Path, name: str) -> None:
    suite = load_suite(name)
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
@pytest.mark.parametrize("prefix", GENERATORS)
async def test_reference_solutions_pass_and_noop_scores_zero_in_bwrap(prefix: str) -> None:
    suite = load_suite(f"{prefix}-test")
    one_each = [next(t for t in suite.tasks if t.id.startswith(name)) for name in GENERATORS[prefix][0]]
    results = await check_suite(one_each, "bwrap", concurrency=2)
    assert [r.problems for r in results if not r.ok] == []
    assert all(r.solution_score == 1.0 and r.noop_score == 0.0 for r in results)
