"""Loading task specs and suites: happy paths, and one clear error per kind of mistake."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from clawgym_env.errors import TaskNotFound, TaskSpecError
from clawgym_env.task import TaskRegistry, load_suite, load_task_dir
from clawgym_env.task.loader import escape_template, render_instruction
from clawgym_env.task.suite import content_hash, repo_tasks_dir

GRADE = "def grade(transcript, workspace_path):\n    return {'ok': 1.0}\n"


def base(**over: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "id": "t1",
        "category": "productivity",
        "difficulty": "easy",
        "instruction": "Write {{ name }} to out.txt",
        "params": [{"name": "alpha"}, {"name": "beta"}],
        "workspace": "workspace",
        "hidden": "hidden",
        "verifiers": [{"kind": "code", "file": "hidden/grade.py", "weight": 0.7}, {"kind": "answer", "expected": "42", "weight": 0.3}],
        "limits": {"wall_time_s": 60, "model_calls": 5, "memory_mb": 512},
        "solution": "solution/solve.sh",
        "metadata": {"owner": "me"},
    }
    spec.update(over)
    return spec


FILES = {"workspace/in.txt": "x\n", "hidden/grade.py": GRADE, "solution/solve.sh": "echo hi > out.txt\n"}


def error_of(make_task: Any, spec: dict[str, Any], files: dict[str, str] | None = None) -> str:
    tdir = make_task(spec, FILES if files is None else files)
    with pytest.raises(TaskSpecError) as info:
        load_task_dir(tdir, "demo")
    return str(info.value)


def test_valid_task_expands_params_and_resolves_paths(make_task: Any) -> None:
    tdir = make_task(base(), FILES)
    specs = load_task_dir(tdir, "demo")
    assert [s.full_id for s in specs] == ["demo/t1-p0", "demo/t1-p1"]
    a, b = specs
    assert a.instruction == "Write alpha to out.txt" and b.instruction == "Write beta to out.txt"
    assert a.base_id == "t1" and a.variant == 0 and a.params == {"name": "alpha"}
    assert a.workspace_dir == tdir / "workspace" and a.hidden_dir == tdir / "hidden"
    assert a.workspace_mount == "/workspace" and a.hidden_mount == "/verifier"
    assert a.solution_path == tdir / "solution" / "solve.sh"
    assert a.limits.wall_time_s == 60 and a.limits.model_calls == 5 and a.limits.memory_mb == 512
    assert [v.name for v in a.verifiers] == ["code", "answer"]
    assert a.verifiers[1].expected == ["42"]
    assert a.sandbox_path_of("hidden/grade.py") == "/verifier/grade.py"
    assert a.expected_noop_score == 0.0


def test_relative_hidden_mount_lands_under_the_workspace(make_task: Any) -> None:
    tdir = make_task(base(params=[], instruction="go", workspace_mount="/root/.openclaw/workspace", hidden_mount="reward"), FILES)
    (spec,) = load_task_dir(tdir, "demo")
    assert spec.id == "t1" and spec.variant is None
    assert spec.hidden_mount == "/root/.openclaw/workspace/reward"


def test_duplicate_verifier_kinds_get_numbered_names(make_task: Any) -> None:
    v = {"kind": "code", "file": "hidden/grade.py"}
    tdir = make_task(base(params=[], instruction="go", verifiers=[v, v]), FILES)
    (spec,) = load_task_dir(tdir, "demo")
    assert [x.name for x in spec.verifiers] == ["code1", "code2"]


@pytest.mark.parametrize(
    ("over", "field", "words"),
    [
        ({"instruction": None}, "instruction", "text"),
        ({"difficulty": "extreme"}, "difficulty", "easy"),
        ({"limits": {"wall_time_s": "soon"}}, "limits.wall_time_s", "number"),
        ({"limits": {"model_calls": 0}}, "limits.model_calls", "larger"),
        ({"verifiers": [{"kind": "llm", "file": "x"}]}, "verifiers[0]", "unknown verifier kind 'llm'"),
        ({"verifiers": [{"file": "hidden/grade.py"}]}, "verifiers[0]", "kind"),
        ({"verifiers": []}, "verifiers", "at least one"),
        ({"verifiers": [{"kind": "code", "file": "hidden/grade.py", "weight": -1}]}, "verifiers[0].weight", "larger"),
        (
            {"verifiers": [{"kind": "rubric", "items": [{"criterion": "c", "options": {"yes": 2}}]}]},
            "verifiers[0].items[0].options",
            "[0, 1]",
        ),
        ({"verifiers": [{"kind": "answer", "expected": "1", "source": "stdout"}]}, "verifiers[0].source", "file:"),
        ({"id": "Bad_Id"}, "id", "lowercase"),
        ({"typo_field": 1}, "typo_field", "remove it"),
        ({"solutoin": "x"}, "solutoin", "did you mean 'solution'"),
        ({"limits": {"model_cals": 3}}, "limits.model_cals", "did you mean 'model_calls'"),
        ({"verifiers": [{"kind": "answer", "expected": "1", "tolerence": 0.1}]}, "verifiers[0].tolerence", "did you mean 'tolerance'"),
        ({"workspace_mount": "workspace"}, "workspace_mount", "absolute"),
        ({"metadata": {"expected_noop_score": 2}}, "expected_noop_score", "[0, 1]"),
    ],
)
def test_schema_errors_name_file_field_and_fix(make_task: Any, over: dict[str, Any], field: str, words: str) -> None:
    msg = error_of(make_task, base(**over))
    assert "task.yaml" in msg and field in msg and "Fix:" in msg and words in msg, msg


def test_unknown_verifier_kind_lists_the_kinds(make_task: Any) -> None:
    msg = error_of(make_task, base(verifiers=[{"kind": "magic"}]))
    for kind in ("code", "script", "rubric", "answer"):
        assert kind in msg


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"workspace": "../elsewhere"}, "'..'"),
        ({"hidden": "/etc"}, "absolute"),
        ({"solution": "solution/nope.sh"}, "does not exist"),
        ({"verifiers": [{"kind": "code", "file": "workspace/in.txt"}]}, "lies in the workspace"),
        ({"id": "other"}, "differs from the folder name"),
    ],
)
def test_path_and_identity_errors(make_task: Any, over: dict[str, Any], words: str, suite_dir: Path) -> None:
    spec = base(**over)
    if over.get("id") == "other":
        tdir = make_task(base(), FILES)
        (tdir / "task.yaml").write_text((tdir / "task.yaml").read_text().replace("id: t1", "id: other"))
        with pytest.raises(TaskSpecError) as info:
            load_task_dir(tdir, "demo")
        msg = str(info.value)
    else:
        msg = error_of(make_task, spec)
    assert words in msg and "Fix:" in msg, msg


def test_symlink_escapes_are_rejected(make_task: Any, tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "key.txt").write_text("s3cret")
    tdir = make_task(base(), FILES)
    os.symlink(outside / "key.txt", tdir / "workspace" / "key.txt")
    with pytest.raises(TaskSpecError, match="symlink leading outside"):
        load_task_dir(tdir, "demo")
    (tdir / "workspace" / "key.txt").unlink()
    os.symlink(outside, tdir / "linked")
    (tdir / "task.yaml").write_text((tdir / "task.yaml").read_text().replace("workspace: workspace", "workspace: linked"))
    with pytest.raises(TaskSpecError, match="symlink leading outside"):
        load_task_dir(tdir, "demo")


def test_template_errors_are_clear(make_task: Any) -> None:
    msg = error_of(make_task, base(instruction="Write {{ name "))
    assert "template syntax error" in msg and "instruction" in msg and "{% raw %}" in msg
    msg = error_of(make_task, base(instruction="Write {{ colour }}"))
    assert "'colour' is undefined" in msg and "params[0]" in msg and "params given: name" in msg
    msg = error_of(make_task, base(instruction="{{ name + 1 }}"))
    assert "template failed" in msg


def test_escape_template_keeps_text_verbatim() -> None:
    text = "Fill {{EPISODE_LIST}} and {% if %} and {% endraw %} and {#c#}"
    assert render_instruction(escape_template(text), {}, Path("x"), "no params") == text


def test_yaml_syntax_and_shape_errors(make_task: Any) -> None:
    tdir = make_task(base(), FILES)
    (tdir / "task.yaml").write_text("id: t1\ninstruction: [unclosed\n")
    with pytest.raises(TaskSpecError, match="invalid YAML"):
        load_task_dir(tdir, "demo")
    (tdir / "task.yaml").write_text("- just\n- a list\n")
    with pytest.raises(TaskSpecError, match="expected a mapping"):
        load_task_dir(tdir, "demo")


def test_several_problems_are_reported_together(make_task: Any) -> None:
    msg = error_of(make_task, base(difficulty="x", limits={"memory_mb": 1}))
    assert "2 problems" in msg and "difficulty" in msg and "limits.memory_mb" in msg


def test_suite_loading_hash_select_and_lookup(make_task: Any, suite_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_task(base(), FILES)
    make_task(base(id="t2", params=[], instruction="second"), FILES)
    suite = load_suite(suite_dir)
    assert suite.name == "demo" and suite.pass_threshold == 1.0 and len(suite) == 3
    assert [t.id for t in suite.select("t1-*")] == ["t1-p0", "t1-p1"]
    assert [t.id for t in suite.select("demo/t2")] == ["t2"]
    h = suite.content_hash
    assert h.startswith("sha256:") and h == content_hash(suite_dir)
    (suite_dir / "t2" / "workspace" / "in.txt").write_text("changed\n")
    assert content_hash(suite_dir) != h
    with pytest.raises(TaskNotFound, match="Did you mean t2"):
        suite.get("t3")
    monkeypatch.setenv("CLAWGYM_SUITES_DIR", str(suite_dir.parent))
    assert load_suite("demo").path == suite_dir
    with pytest.raises(TaskNotFound, match="Did you mean demo"):
        load_suite("demoo")


def test_suite_name_must_match_folder(suite_dir: Path) -> None:
    (suite_dir / "suite.yaml").write_text("name: other\n")
    with pytest.raises(TaskSpecError, match="differs from the folder name"):
        load_suite(suite_dir)


def test_registry_lookup_with_suggestions(make_task: Any, suite_dir: Path) -> None:
    make_task(base(), FILES)
    reg = TaskRegistry.from_dir(suite_dir.parent)
    assert reg.get("demo/t1-p1").instruction == "Write beta to out.txt"
    assert reg.get("t1-p0").full_id == "demo/t1-p0"
    assert "demo/t1-p0" in reg and "demo/zzz" not in reg
    with pytest.raises(TaskNotFound, match="Did you mean.*t1-p1"):
        reg.get("demo/t1-p2")
    with pytest.raises(TaskNotFound, match="Did you mean demo"):
        reg.suite("dem")


def test_repo_suites_all_validate() -> None:
    root = repo_tasks_dir()
    reg = TaskRegistry.from_dir(root)
    assert reg.suites, f"no suites under {root}"
    for suite in reg.suites.values():
        assert len(suite) > 0
        for t in suite.tasks:
            assert t.verifiers and t.instruction.strip()


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"solution": "workspace/in.txt"}, "agent would read it"),
        ({"verifiers": [{"kind": "rubric", "files": ["../x"], "items": [{"criterion": "c"}]}]}, "relative to the workspace"),
        ({"verifiers": [{"kind": "answer", "expected": "1", "source": "file:/etc/passwd"}]}, "relative to the workspace"),
    ],
)
def test_agent_visible_or_escaping_verifier_paths_are_rejected(make_task: Any, over: dict[str, Any], words: str) -> None:
    msg = error_of(make_task, base(**over))
    assert words in msg and "Fix:" in msg, msg
