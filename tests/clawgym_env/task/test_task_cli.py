"""`clawgym tasks ...` through Typer's runner: the commands a task author types."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgym_env.cli.main import app
from tests.clawgym_env.conftest import FIXTURES

runner = CliRunner()


@pytest.fixture(autouse=True)
def _suites_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAWGYM_SUITES_DIR", str(tmp_path / "suites"))
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path / "suites"


def test_list_show_and_validate_repo_suite() -> None:
    res = runner.invoke(app, ["tasks", "list"])
    assert res.exit_code == 0 and "clawgym-original" in res.output
    res = runner.invoke(app, ["tasks", "list", "clawgym-original"])
    assert res.exit_code == 0 and "dedupe-contacts" in res.output and "code:1" in res.output
    res = runner.invoke(app, ["tasks", "show", "clawgym-original/dedupe-contacts"])
    assert res.exit_code == 0 and "input/contacts.csv" in res.output and "/verifier" in res.output
    res = runner.invoke(app, ["tasks", "show", "clawgym-original/dedupe-contact"])
    assert res.exit_code == 1 and "Did you mean dedupe-contacts" in res.output
    res = runner.invoke(app, ["tasks", "validate", "tasks/clawgym-original"])
    assert res.exit_code == 0 and "valid" in res.output


def test_validate_reports_every_broken_task(suite_dir: Path) -> None:
    for name, body in {
        "a": "id: a\ninstruction: hi\nverifiers: [{kind: nope}]\n",
        "b": "id: b\ninstruction: '{{ x'\nverifiers: [{kind: answer, expected: '1'}]\n",
        "c": "id: c\ninstruction: ok\nverifiers: [{kind: answer, expected: '1'}]\n",
    }.items():
        (suite_dir / name).mkdir()
        (suite_dir / name / "task.yaml").write_text(body)
    res = runner.invoke(app, ["tasks", "validate", str(suite_dir)])
    assert res.exit_code == 1
    assert "unknown verifier kind 'nope'" in res.output and "template syntax error" in res.output
    res = runner.invoke(app, ["tasks", "validate", str(suite_dir / "c" / "task.yaml")])
    assert res.exit_code == 0 and "1 task spec(s) valid" in res.output


@pytest.mark.sandbox
def test_import_then_check_officeqa_suite(_suites_dir: Path) -> None:
    csv, docs = FIXTURES / "officeqa" / "officeqa.csv", FIXTURES / "officeqa" / "docs"
    res = runner.invoke(app, ["tasks", "import", "officeqa", str(csv), "--suite", "oqa", "--docs", str(docs)])
    assert res.exit_code == 1 and "1 invalid task(s)" in res.output and "no_such_file.txt" in res.output
    res = runner.invoke(app, ["tasks", "import", "officeqa", str(csv), "--suite", "oqa", "--docs", str(docs), "--skip-invalid"])
    assert res.exit_code == 0, res.output
    assert "imported 3 task(s)" in res.output and "skipped 1" in res.output
    assert "mapped:" in res.output and "not mapped:" in res.output and "FINAL_ANSWER" in res.output
    assert (_suites_dir / "oqa" / "uid0002" / "task.yaml").is_file()
    res = runner.invoke(app, ["tasks", "import", "officeqa", str(csv), "--suite", "oqa", "--docs", str(docs)])
    assert res.exit_code == 1 and "--force" in res.output
    res = runner.invoke(app, ["tasks", "check", "oqa", "-j", "2"])
    assert res.exit_code == 0, res.output
    assert "3 task(s): 3 ok, 0 failed; solutions passed 3" in res.output


@pytest.mark.sandbox
def test_check_exits_nonzero_with_a_failure_table(make_task, suite_dir: Path) -> None:  # type: ignore[no-untyped-def]
    make_task(
        {
            "id": "bad",
            "instruction": "say 42",
            "verifiers": [{"kind": "answer", "expected": "42"}],
            "solution": "solution/final_message.txt",
        },
        {"solution/final_message.txt": "<answer>30</answer>"},
    )
    res = runner.invoke(app, ["tasks", "check", str(suite_dir)])
    assert res.exit_code == 1
    assert "1 of 1 task(s) failed" in res.output and "demo/bad" in res.output and "answer/match=0" in res.output


@pytest.mark.sandbox
def test_check_with_a_scripted_judge_grades_rubric_solutions(make_task, suite_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    make_task(
        {
            "id": "memo",
            "instruction": "Write memo.md for the CFO",
            "workspace": "workspace",
            "verifiers": [{"kind": "rubric", "files": ["memo.md"], "items": [{"criterion": "Addressed to the CFO"}]}],
            "solution": "solution/solve.sh",
        },
        {"workspace/notes.txt": "q3\n", "solution/solve.sh": "echo 'Dear CFO' > memo.md\n"},
    )
    yes, no = tmp_path / "yes.yaml", tmp_path / "no.yaml"
    yes.write_text('default: \'{"reasoning": "Addressed to the CFO.", "verdict": "yes"}\'\n')
    no.write_text('default: \'{"reasoning": "No salutation.", "verdict": "no"}\'\n')
    res = runner.invoke(app, ["tasks", "check", str(suite_dir)])
    assert res.exit_code == 0 and "without a checked solution 1" in res.output
    res = runner.invoke(app, ["tasks", "check", str(suite_dir), "--judge", f"scripted:{yes}"])
    assert res.exit_code == 0 and "solutions passed 1" in res.output, res.output
    res = runner.invoke(app, ["tasks", "check", str(suite_dir), "--judge", f"scripted:{no}"])
    assert res.exit_code == 1 and "rubric/item1=0" in res.output


def test_error_text_is_not_rich_markup() -> None:
    res = runner.invoke(app, ["tasks", "show", "clawgym-original/[bold]x"])
    assert res.exit_code == 1 and "no task '[bold]x'" in res.output
