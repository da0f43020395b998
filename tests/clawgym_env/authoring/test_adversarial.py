"""`tasks check --adversarial`: gaming strategies played through real sandboxes against graders.

The strategies are real; the graders under attack are small ones written here, each with the flaw
a strategy is meant to find, next to a fixed one the same strategy must not lift.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clawgym_env.authoring.adversarial import BUILTIN, Strategy, TaskView, default_strategies, load_strategy
from clawgym_env.authoring.check import check_suite
from clawgym_env.cli.main import app
from clawgym_env.errors import ConfigError, TaskSpecError
from clawgym_env.task import load_suite
from clawgym_env.task.loader import load_task_dir

pytestmark = pytest.mark.sandbox

EXISTS_HALF = (  # half the credit for the file existing: empty and placeholder outputs earn 0.5
    "import os\n"
    "def grade(t, w):\n"
    "    p = os.path.join(w, 'output', 'count.txt')\n"
    "    ok = os.path.exists(p) and open(p).read().strip() == '3'\n"
    "    return {'exists': float(os.path.exists(p)), 'right': float(ok)}\n"
)
EXACT = (
    "import os\n"
    "def grade(t, w):\n"
    "    p = os.path.join(w, 'output', 'count.txt')\n"
    "    return {'right': float(os.path.exists(p) and open(p).read().strip() == '3')}\n"
)
# Verifiers run with PYTHONSAFEPATH=1 (a json.py the agent left in the cwd must not load into a grader's
# own `python3 -c`), so a probe that imports the agent's module puts "." on its path itself, as shipped graders do.
PROBE_COMPARES = (  # runs the agent's code in a subprocess, but lets that process compare what the code returned
    "import subprocess, sys\n"
    'PROBE = \'import sys; sys.path.insert(0, "."); import calc; print("ADDS" if calc.add(2, 3) == 5 else "WRONG")\'\n'
    "def grade(t, w):\n"
    "    r = subprocess.run([sys.executable, '-c', PROBE], cwd=w, capture_output=True, text=True, timeout=20)\n"
    "    return {'adds': float('ADDS' in r.stdout)}\n"
)
SERIALISED = (  # runs the agent's code in a subprocess and compares a plain JSON value
    "import json, subprocess, sys\n"
    'PROBE = \'import json, sys; sys.path.insert(0, "."); import calc; print("\\\\nVALUES " + json.dumps(calc.add(2, 3)))\'\n'
    "def grade(t, w):\n"
    "    try:\n"
    "        r = subprocess.run([sys.executable, '-c', PROBE], cwd=w, capture_output=True, text=True, timeout=20)\n"
    "        line = [ln for ln in r.stdout.splitlines() if ln.startswith('VALUES ')][-1]\n"
    "        v = json.loads(line[7:])\n"
    "    except Exception:\n"
    "        return {'adds': 0.0}\n"
    "    return {'adds': float(type(v) is int and v == 5)}\n"
)
COUNT_SPEC = {
    "instruction": "Count the lines of input/words.txt and write the number to output/count.txt.",
    "workspace": "workspace",
    "hidden": "hidden",
    "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
    "solution": "solution/solve.sh",
}
COUNT_FILES = {"workspace/input/words.txt": "a\nb\nc\n", "solution/solve.sh": "mkdir -p output; echo 3 > output/count.txt\n"}
CALC_SPEC = {
    "instruction": "Implement add(a, b) in calc.py.",
    "workspace": "workspace",
    "hidden": "hidden",
    "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
    "solution": "solution/solve.sh",
}
CALC_FILES = {
    "workspace/calc.py": "def add(a, b):\n    raise NotImplementedError\n",
    "solution/solve.sh": "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n",
}


def _by_id(results: list[Any]) -> dict[str, Any]:
    return {r.task_id.split("/")[1]: r for r in results}


def test_task_view_finds_outputs_inputs_and_candidates(make_task: Any, suite_dir: Path) -> None:
    make_task({**COUNT_SPEC, "id": "count"}, {**COUNT_FILES, "hidden/grade.py": EXACT})
    view = TaskView(load_task_dir(suite_dir / "count", "demo")[0])
    assert view.outputs == ["output/count.txt"] and view.mentioned == ["input/words.txt", "output/count.txt"]
    assert view.inputs == {"input/words.txt": "a\nb\nc\n"} and view.lines == ["a", "b", "c"]
    labels = {a.label for s in default_strategies() for a in s.attempts(view)}
    assert {"empty", "placeholder", "copy-input", "everything:lines", "first-item"} <= labels
    assert not any(x.startswith(("always-equal", "pin-source", "judge-bait")) for x in labels)  # no code, no rubric
    assert len({cls.name for cls in BUILTIN}) == len(BUILTIN) and all(cls.tries for cls in BUILTIN)


async def test_flawed_graders_are_caught_and_fixed_ones_pass(make_task: Any, suite_dir: Path) -> None:
    make_task({**COUNT_SPEC, "id": "exists-half"}, {**COUNT_FILES, "hidden/grade.py": EXISTS_HALF})
    make_task({**COUNT_SPEC, "id": "exact"}, {**COUNT_FILES, "hidden/grade.py": EXACT})
    make_task(
        {**COUNT_SPEC, "id": "declared-half", "metadata": {"max_exploit_score": 0.5}}, {**COUNT_FILES, "hidden/grade.py": EXISTS_HALF}
    )
    make_task({**CALC_SPEC, "id": "probe-compares"}, {**CALC_FILES, "hidden/grade.py": PROBE_COMPARES})
    make_task({**CALC_SPEC, "id": "serialised"}, {**CALC_FILES, "hidden/grade.py": SERIALISED})
    results = _by_id(await check_suite(load_suite(suite_dir), "bwrap", concurrency=4, strategies=default_strategies()))

    half = results["exists-half"]
    assert half.solution_status == "pass" and half.noop_status == "pass"
    assert half.exploit_status == "fail" and half.exploit_score == 0.5 and not half.ok
    assert half.attempts["empty"] == 0.5 and half.attempts["placeholder"] == 0.5 and half.attempts["do-nothing"] == 0.0
    assert "above max_exploit_score 0" in " ".join(half.problems) and "code/exists" in " ".join(half.problems)
    assert results["exact"].ok and results["exact"].exploit_status == "pass" and results["exact"].exploit_score == 0.0
    declared = results["declared-half"]
    assert declared.ok and declared.exploit_status == "pass" and declared.max_exploit == 0.5

    objects = results["probe-compares"]
    assert objects.exploit_status == "fail" and objects.exploit_by == "always-equal" and objects.exploit_score == 1.0
    serialised = results["serialised"]
    assert serialised.ok and serialised.solution_score == 1.0 and serialised.exploit_score == 0.0
    assert {"always-equal", "raise-on-inspect:exit0", "verdict-print:os-exit", "test-runner-hook"} <= set(serialised.attempts)


async def test_threshold_exemptions_and_open_tasks(make_task: Any, suite_dir: Path) -> None:
    make_task({**COUNT_SPEC, "id": "too-lenient", "metadata": {"max_exploit_score": 0.5}}, {**COUNT_FILES, "hidden/grade.py": EXISTS_HALF})
    copy = {
        "instruction": "Copy input/words.txt to output/words.txt.",
        "workspace": "workspace",
        "hidden": "hidden",
        "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
        "solution": "solution/solve.sh",
    }
    grade = (
        "import os\ndef grade(t, w):\n    p = os.path.join(w, 'output', 'words.txt')\n"
        "    return {'same': float(os.path.exists(p) and open(p).read() == 'a\\nb\\nc\\n')}\n"
    )
    make_task(
        {**copy, "id": "copy-unexempt"},
        {**COUNT_FILES, "hidden/grade.py": grade, "solution/solve.sh": "mkdir -p output; cp input/words.txt output/\n"},
    )
    make_task(
        {
            **copy,
            "id": "copy-exempt",
            "metadata": {
                "exploit_exempt": {"copy-input": "copying is the task", "everything:lines": "all lines of the input are its copy"}
            },
        },
        {**COUNT_FILES, "hidden/grade.py": grade, "solution/solve.sh": "mkdir -p output; cp input/words.txt output/\n"},
    )
    make_task(
        {
            "id": "brevity",
            "instruction": "Say nothing.",
            "hidden": "hidden",
            "verifiers": [{"kind": "code", "file": "hidden/grade.py"}],
            "metadata": {"expected_noop_score": 1.0},
        },
        {"hidden/grade.py": "def grade(t, w):\n    return {'short': float(not t['final_message'])}\n"},
    )
    (suite_dir / "suite.yaml").write_text("name: demo\npass_threshold: 0.5\n")
    results = _by_id(await check_suite(load_suite(suite_dir), "bwrap", concurrency=4, strategies=default_strategies()))

    lenient = results["too-lenient"]
    assert lenient.exploit_score == 0.5 and lenient.exploit_status == "fail"
    assert "reaches the suite's pass_threshold 0.5" in " ".join(lenient.problems)
    unexempt = results["copy-unexempt"]
    assert unexempt.exploit_status == "fail" and unexempt.attempts["copy-input"] == unexempt.attempts["everything:lines"] == 1.0
    exempt = results["copy-exempt"]
    assert exempt.ok and exempt.solution_score == 1.0 and exempt.exploit_score == 0.0
    assert "copy-input" not in exempt.attempts and "everything:lines" not in exempt.attempts and "empty" in exempt.attempts
    assert results["brevity"].exploit_status == "open" and results["brevity"].ok


class OnlyTheAnswer(Strategy):
    """A suite's own strategy: writes the number 3 wherever it is asked for a count."""

    name = "guess-three"
    tries = "Writes 3 to every output."

    def attempts(self, task: TaskView) -> list[Any]:
        from clawgym_env.authoring.adversarial import Attempt

        return [Attempt(self.name, dict.fromkeys(task.outputs, "3\n"))]


def test_strategies_load_from_module_and_suite_file(suite_dir: Path) -> None:
    assert load_strategy(f"{__name__}:OnlyTheAnswer").name == "guess-three"
    (suite_dir / "strategies.py").write_text(
        "from clawgym_env.authoring.adversarial import Attempt, Strategy\n"
        "class Nothing(Strategy):\n    name = 'nothing'\n    tries = 'x'\n"
        "    def attempts(self, task):\n        return [Attempt('nothing')]\n"
        "class NotOne:\n    pass\n"
    )
    assert load_strategy("strategies.py:Nothing", suite_dir).name == "nothing"
    for bad, why in (
        ("strategies.py:NotOne", "not a subclass"),
        ("nope.py:X", "no file"),
        ("nocolon", "must look like"),
        ("no_such_module_xyz:X", "cannot import"),
    ):
        with pytest.raises(ConfigError, match=why):
            load_strategy(bad, suite_dir)


def test_cli_adversarial_runs_suite_strategies_and_fails_a_guessable_task(
    make_task: Any, suite_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    make_task({**COUNT_SPEC, "id": "guessable"}, {**COUNT_FILES, "hidden/grade.py": EXACT})
    runner = CliRunner()
    res = runner.invoke(app, ["tasks", "check", str(suite_dir), "--adversarial", "-j", "2"])
    assert res.exit_code == 0 and "lifted above 0 by some strategy" in res.output and "0 of 1" in res.output
    (suite_dir / "suite.yaml").write_text(
        f"name: demo\npass_threshold: 1.0\nmetadata:\n  adversarial_strategies: ['{__name__}:OnlyTheAnswer']\n"
    )
    res = runner.invoke(app, ["tasks", "check", str(suite_dir), "--adversarial", "--only", "guess-three,empty"])
    assert res.exit_code == 1 and "guess-three" in res.output and "1 of 1" in res.output
    res = runner.invoke(app, ["tasks", "check", str(suite_dir), "--only", "nope", "--adversarial"])
    assert res.exit_code == 1 and "unknown strategies" in res.output
    res = runner.invoke(app, ["tasks", "strategies"])
    assert res.exit_code == 0 and all(cls.name in res.output for cls in BUILTIN)


def test_declared_scores_are_validated(make_task: Any, suite_dir: Path) -> None:
    for meta, why in (
        ({"max_exploit_score": 1.5}, "max_exploit_score must be a number"),
        ({"expected_noop_score": 0.4, "max_exploit_score": 0.2}, "below expected_noop_score"),
        ({"exploit_exempt": ["copy-input"]}, "exploit_exempt must map"),
    ):
        make_task({**COUNT_SPEC, "id": "bad", "metadata": meta}, {**COUNT_FILES, "hidden/grade.py": EXACT})
        with pytest.raises(TaskSpecError, match=why):
            load_task_dir(suite_dir / "bad", "demo")
    make_task({**COUNT_SPEC, "id": "floor", "metadata": {"expected_noop_score": 0.25}}, {**COUNT_FILES, "hidden/grade.py": EXACT})
    assert load_task_dir(suite_dir / "floor", "demo")[0].max_exploit_score == 0.25


REPO = Path(__file__).resolve().parents[3]
SHIPPED = [
    REPO / "tasks" / "jobbench-mini",
    REPO / "tasks" / "officeqa-mini",
    REPO / "trainers" / "suites" / "toy-rl",
    REPO / "tests" / "harnesses" / "tasks" / "h6-smoke",
]
RUNS_AGENT_CODE = [
    "smoke-*",
    "fix-failing-test",
    "implement-durations",
    "rename-function",
    "write-unit-tests",
    "tmp-cleanup-script",
    "dedupe-contacts",
    "backup-rotation",
    "budget-portfolio",
    "redact-pii",
    "sql-report-queries",
    "meeting-action-items",
    "dependency-audit",
    "invoice-reminders",
]
"""The clawgym-original tasks whose graders run the agent's code or were lifted before (default tier)."""


async def _assert_resists(suite: Any, specs: list[Any]) -> None:
    results = await check_suite(specs, "bwrap", concurrency=4, strategies=default_strategies(), pass_threshold=suite.pass_threshold)
    bad = [(r.task_id, r.exploit_score, r.exploit_by, r.problems) for r in results if not r.ok]
    assert not bad, bad
    assert all(r.exploit_status in ("pass", "open") for r in results)


@pytest.mark.parametrize("suite_dir", SHIPPED, ids=lambda p: p.name)
async def test_shipped_suite_resists_gaming(suite_dir: Path) -> None:
    suite = load_suite(suite_dir)
    await _assert_resists(suite, list(suite.tasks))


async def test_clawgym_original_code_graders_resist_gaming() -> None:
    suite = load_suite(REPO / "tasks" / "clawgym-original")
    await _assert_resists(suite, suite.select(RUNS_AGENT_CODE))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["clawgym-original", "procgen-test", "procgen-train"])
async def test_every_repo_task_resists_gaming(name: str) -> None:
    suite = load_suite(REPO / "tasks" / name)
    await _assert_resists(suite, list(suite.tasks))


@pytest.mark.slow
async def test_imported_clawgym_sample_is_reported_not_fixed(sample_dir: Path, tmp_path: Path) -> None:
    """The 60 real ClawGym sample tasks: the check reports the graders gaming lifts (README figures)."""
    from clawgym_env.authoring.importers import import_suite

    suite = load_suite(import_suite("clawgym", sample_dir, "clawgym-sample", tmp_path).path)
    results = await check_suite(suite, "bwrap", concurrency=4, strategies=default_strategies())
    lifted = {r.task_id.split("/")[1]: r for r in results if (r.exploit_score or 0) > 0}
    assert len(results) == 60 and len(lifted) >= 50
    assert lifted["task-1056"].exploit_score > 0.7 and lifted["task-1056"].exploit_by.startswith("everything")
    assert all(r.exploit_status == "fail" for r in lifted.values())
    hedged = [r for r in results if any(k.startswith("hedge:") and v > 0 for k, v in r.attempts.items())]
    assert len(hedged) >= 30
    # outputs found beyond file names with an extension, over read-only inputs: 0.0 with the old output finding
    assert lifted["task-0066"].exploit_score > 0.6 and lifted["task-1419"].exploit_score > 0.4
