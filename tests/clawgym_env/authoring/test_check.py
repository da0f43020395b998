"""check_suite in real sandboxes: reference solutions score 1.0, do-nothing scores its declared floor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawgym_env.authoring.check import check_suite, record_noop_scores
from clawgym_env.authoring.importers import import_suite
from clawgym_env.task import load_suite
from clawgym_env.task.suite import repo_tasks_dir

pytestmark = pytest.mark.sandbox

GRADE = (
    "import os\n"
    "def grade(t, w):\n"
    "    p = os.path.join(w, 'out.txt')\n"
    "    ok = os.path.exists(p) and open(p).read().strip() == 'hello'\n"
    "    return {'right': 1.0 if ok else 0.0, 'readme_kept': 1.0 if os.path.exists(os.path.join(w, 'README')) else 0.0}\n"
)


async def test_sample_noop_scores_match_each_reward_sh(sample_dir: Path, tmp_path: Path) -> None:
    report = import_suite("clawgym", sample_dir, "clawgym-sample", tmp_path)
    suite = load_suite(report.path)
    seen: list[str] = []
    results = await check_suite(suite, "bwrap", concurrency=4, on_result=lambda r: seen.append(r.task_id))
    assert len(results) == 60 and sorted(seen) == sorted(r.task_id for r in results)
    scores = {r.task_id.split("/")[1]: round(r.noop_score, 3) for r in results}
    nonzero = {k: v for k, v in scores.items() if v != 0.0}
    assert nonzero == {"task-1122": 0.154, "task-1452": 0.056}
    assert all(r.solution_status == "none" for r in results)
    failed = {r.task_id for r in results if not r.ok}
    assert failed == {"clawgym-sample/task-1122", "clawgym-sample/task-1452"}  # shown, not hidden
    r1122 = next(r for r in results if r.task_id.endswith("task-1122"))
    assert "expected_noop_score: 0.154" in r1122.problems[0]

    written = record_noop_scores(results, suite.tasks)
    assert len(written) == 2 and all(r.ok for r in results)
    again = load_suite(report.path)
    assert again.get("task-1122").expected_noop_score == 0.154
    rerun = await check_suite(again.select(["task-1122", "task-1452", "task-0000"]), "bwrap")
    assert [r.noop_status for r in rerun] == ["pass", "declared", "declared"]
    assert all(r.ok for r in rerun)


def _task(make_task: Any, tid: str, solve: str | None, **over: Any) -> None:
    spec = {
        "id": tid,
        "instruction": "Write hello to out.txt",
        "workspace": "workspace",
        "hidden": "hidden",
        "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
        **over,
    }
    files = {"workspace/README": "task\n", "hidden/grade.py": GRADE}
    if solve is not None:
        spec["solution"] = "solution/solve.sh"
        files["solution/solve.sh"] = solve
        files["solution/helper.txt"] = "hello\n"
    make_task(spec, files)


async def test_check_reports_each_kind_of_unsound_task(make_task: Any, suite_dir: Path) -> None:
    half = {"metadata": {"expected_noop_score": 0.5}}  # doing nothing keeps README: readme_kept=1 -> 0.5
    _task(make_task, "good", "cp /solution/helper.txt out.txt\n", **half)
    _task(make_task, "wrong", "echo bye > out.txt\n", **half)
    _task(make_task, "crashes", "echo oops >&2; exit 3\n", **half)
    _task(make_task, "nosolution", None, **half)
    _task(make_task, "floor", "echo hello > out.txt\n")  # README kept -> noop scores 0.5, undeclared
    _task(make_task, "misdeclared", "echo hello > out.txt\n", metadata={"expected_noop_score": 0.25})
    make_task(
        {
            "id": "judged",
            "instruction": "Write a report",
            "workspace": "workspace",
            "verifiers": [{"kind": "rubric", "files": ["report.md"], "items": [{"criterion": "good"}]}],
            "solution": "solution/solve.sh",
        },
        {"workspace/x": "", "solution/solve.sh": "echo r > report.md\n"},
    )
    make_task(
        {
            "id": "answered",
            "instruction": "What is 6*7?",
            "verifiers": [{"kind": "answer", "expected": "42"}],
            "solution": "solution/final_message.txt",
        },
        {"solution/final_message.txt": "<answer>42</answer>\n"},
    )
    results = {r.task_id.split("/")[1]: r for r in await check_suite(load_suite(suite_dir), "bwrap", concurrency=3)}

    good = results["good"]
    assert good.ok and good.solution_status == "pass" and good.solution_score == 1.0 and good.noop_status == "declared"
    assert results["floor"].noop_status == "fail" and results["floor"].solution_status == "pass"
    assert results["misdeclared"].noop_status == "fail" and "declares 0.25" in " ".join(results["misdeclared"].problems)
    wrong = results["wrong"]
    assert wrong.solution_status == "fail" and wrong.solution_score == pytest.approx(0.5)
    assert "code/right=0" in " ".join(wrong.problems)
    crashes = results["crashes"]
    assert crashes.solution_status == "fail" and "exited 3" in crashes.problems[0] and "oops" in crashes.problems[0]
    assert results["nosolution"].solution_status == "none" and results["nosolution"].ok
    assert results["judged"].solution_status == "skipped" and results["judged"].noop_status == "pass"
    assert results["judged"].ok and "needs a judge" in results["judged"].problems[0]
    assert results["answered"].ok and results["answered"].solution_status == "pass" and results["answered"].noop_score == 0.0
    assert "expected_noop_score: 0.5" in " ".join(results["floor"].problems)


async def test_every_shipped_task_is_sound() -> None:
    root = repo_tasks_dir()
    for suite_dir in sorted(p for p in root.iterdir() if (p / "suite.yaml").is_file()):
        results = await check_suite(load_suite(suite_dir), "bwrap", concurrency=4)
        bad = [(r.task_id, r.problems) for r in results if not r.ok]
        assert not bad, bad


async def test_params_reach_solution_grader_and_script(make_task: Any, suite_dir: Path) -> None:
    grade = (
        "import os\ndef grade(t, w):\n    p = os.path.join(w, 'out.txt')\n"
        "    return {'ok': 1.0 if os.path.exists(p) and open(p).read().strip() == t['params']['word'] else 0.0}\n"
    )
    script = 'test "$(cat out.txt 2>/dev/null)" = "$CLAWGYM_PARAM_WORD" && echo 1 || echo 0\n'
    make_task(
        {
            "id": "echo-word",
            "instruction": "Write {{ word }} to out.txt",
            "params": [{"word": "alpha"}, {"word": "beta"}],
            "hidden": "hidden",
            "verifiers": [{"kind": "code", "file": "hidden/grade.py"}, {"kind": "script", "file": "hidden/reward.sh"}],
            "solution": "solution/solve.sh",
        },
        {"hidden/grade.py": grade, "hidden/reward.sh": script, "solution/solve.sh": 'echo "$CLAWGYM_PARAM_WORD" > out.txt\n'},
    )
    results = await check_suite(load_suite(suite_dir), "bwrap")
    assert [(r.task_id, r.solution_score, r.noop_score) for r in results] == [
        ("demo/echo-word-p0", 1.0, 0.0),
        ("demo/echo-word-p1", 1.0, 0.0),
    ]
