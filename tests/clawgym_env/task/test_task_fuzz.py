"""Fuzz the loader: whatever the YAML holds, the only failure is a TaskSpecError."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawgym_env.errors import TaskSpecError
from clawgym_env.task.loader import load_task_dir, parse_task

FIELDS = [
    "id",
    "version",
    "category",
    "difficulty",
    "instruction",
    "params",
    "workspace",
    "workspace_mount",
    "hidden",
    "hidden_mount",
    "verifiers",
    "limits",
    "solution",
    "metadata",
    "suite",
]
VFIELDS = ["kind", "file", "weight", "name", "items", "files", "expected", "tolerance", "tag", "source", "timeout_s"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        [
            "t",
            "code",
            "script",
            "rubric",
            "answer",
            "hidden/grade.py",
            "../x",
            "/abs",
            "{{ x }}",
            "{% if %}",
            "easy",
            "file:out.txt",
            "workspace",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.one_of(st.sampled_from(FIELDS + VFIELDS), st.text(max_size=8)), kids, max_size=5)
    ),
    max_leaves=20,
)
verifier = st.dictionaries(st.sampled_from(VFIELDS), values, max_size=6)
task_dicts = st.fixed_dictionaries(
    {"id": st.sampled_from(["t", "T", "", 5])},
    optional={
        "instruction": st.one_of(st.text(max_size=40), st.sampled_from(["Do {{ a }}", "{% for x in y %}", "ok"]), values),
        "verifiers": st.one_of(st.lists(verifier, max_size=3), values),
        "params": st.one_of(st.lists(st.dictionaries(st.text(max_size=4), values, max_size=3), max_size=3), values),
        **{f: values for f in FIELDS if f not in ("id", "instruction", "verifiers", "params")},
    },
)


def _task_dir(tmp: Path) -> Path:
    d = tmp / "t"
    (d / "hidden").mkdir(parents=True, exist_ok=True)
    (d / "hidden" / "grade.py").write_text("def grade(t, w):\n    return {}\n")
    (d / "workspace").mkdir(exist_ok=True)
    return d


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=task_dicts)
def test_random_task_mappings_only_raise_spec_errors(tmp_path: Path, data: dict) -> None:
    d = _task_dir(tmp_path)
    try:
        specs = parse_task(data, d, "demo")
    except TaskSpecError as exc:
        assert str(exc).strip()
    else:
        assert specs and all(s.full_id.startswith("demo/t") for s in specs)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=200), values.map(lambda v: yaml.safe_dump(v))))
def test_random_yaml_text_only_raises_spec_errors(tmp_path: Path, text: str) -> None:
    d = _task_dir(tmp_path)
    (d / "task.yaml").write_text(text, encoding="utf-8")
    try:
        load_task_dir(d, "demo")
    except TaskSpecError as exc:
        assert "task.yaml" in str(exc)


VALID = {
    "id": "t",
    "instruction": "Do {{ a }}",
    "params": [{"a": 1}],
    "workspace": "workspace",
    "hidden": "hidden",
    "verifiers": [{"kind": "code", "file": "hidden/grade.py"}, {"kind": "answer", "expected": "1"}],
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS), value=values, vfield=st.sampled_from(VFIELDS), vvalue=values)
def test_one_mutation_of_a_valid_spec_only_raises_spec_errors(
    tmp_path: Path, field: str, value: object, vfield: str, vvalue: object
) -> None:
    d = _task_dir(tmp_path)
    assert parse_task(VALID, d, "demo")
    data = {**VALID, field: value}
    data2 = {**VALID, "verifiers": [{**VALID["verifiers"][0], vfield: vvalue}]}
    for candidate in (data, data2):
        try:
            parse_task(candidate, d, "demo")
        except TaskSpecError as exc:
            assert "Fix" in str(exc) or "fix" in str(exc), str(exc)
