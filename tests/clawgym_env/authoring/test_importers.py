"""Importers: ClawGym folders (all 60 sample tasks), ClawGym HF JSONL, OfficeQA (JobBench: test_jobbench); atomic writes; pull offline."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawgym_env.authoring.importers import import_suite
from clawgym_env.errors import ConfigError, ImportInvalidError, TaskError
from clawgym_env.grading import make_transcript, verify
from clawgym_env.grading.verify import run_verifiers
from clawgym_env.sandbox import SandboxConfig, create_sandbox
from clawgym_env.task import AnswerVerifier, ScriptVerifier, load_suite
from tests.clawgym_env.conftest import FIXTURES


def test_all_sixty_clawgym_sample_tasks_import_and_validate(sample_dir: Path, tmp_path: Path) -> None:
    report = import_suite("clawgym", sample_dir, "clawgym-sample", tmp_path)
    assert report.tasks == 60 and report.skipped == []
    suite = load_suite(tmp_path / "clawgym-sample")
    assert len(suite) == 60 and suite.name == "clawgym-sample"
    for task in suite.tasks:
        original = task.metadata["original_id"]
        entry = json.loads((sample_dir / original / "data_entry.json").read_text())
        assert task.id == original.replace("_", "-")
        assert task.instruction == entry["user_query"]  # braces in prompts survive the template
        assert task.workspace_mount == "/root/.openclaw/workspace"
        assert task.hidden_mount == "/root/.openclaw/workspace/reward"
        assert isinstance(task.verifiers[0], ScriptVerifier)
        assert task.sandbox_path_of(task.verifiers[0].file) == "/root/.openclaw/workspace/reward/reward.sh"
        src_files = sorted(
            p.relative_to(sample_dir / original / "input_files").as_posix()
            for p in (sample_dir / original / "input_files").rglob("*")
            if p.is_file()
        )
        assert task.workspace_dir is not None
        got = sorted(p.relative_to(task.workspace_dir).as_posix() for p in task.workspace_dir.rglob("*") if p.is_file())
        assert got == src_files
        assert (task.hidden_dir / "check.py").read_bytes() == (sample_dir / original / "reward" / "check.py").read_bytes()


def test_import_refuses_to_overwrite_and_leaves_nothing_on_failure(sample_dir: Path, tmp_path: Path) -> None:
    import_suite("clawgym", sample_dir / "task_0000", "one", tmp_path)
    with pytest.raises(ConfigError, match="already exists.*--force"):
        import_suite("clawgym", sample_dir / "task_0033", "one", tmp_path)
    report = import_suite("clawgym", sample_dir / "task_0033", "one", tmp_path, force=True)
    assert [t.id for t in load_suite(report.path).tasks] == ["task-0033"]
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "data_entry.json").write_text("{}")
    with pytest.raises(ConfigError, match="(?s)nothing imported.*no user_query"):
        import_suite("clawgym", bad, "two", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "one"]  # no half-written suite, no temp dir
    with pytest.raises(ConfigError, match="unknown import format"):
        import_suite("csv", bad, "two", tmp_path)
    with pytest.raises(ConfigError, match="not a valid suite name"):
        import_suite("clawgym", bad, "Two_", tmp_path)


def test_default_destination_is_the_user_suites_dir(sample_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWGYM_SUITES_DIR", str(tmp_path / "suites"))
    report = import_suite("clawgym", sample_dir / "task_0000", "mine")
    assert report.path == tmp_path / "suites" / "mine"
    assert load_suite("mine").tasks[0].id == "task-0000"


@pytest.mark.sandbox
async def test_clawgym_hf_jsonl_import_and_its_hook_grades(tmp_path: Path) -> None:
    with pytest.raises(ImportInvalidError, match="2 invalid task"):
        import_suite("clawgym-hf", FIXTURES / "clawgym-hf" / "syn_task.jsonl", "hf", tmp_path)
    report = import_suite("clawgym-hf", FIXTURES / "clawgym-hf" / "syn_task.jsonl", "hf", tmp_path, skip_invalid=True)
    assert report.tasks == 2 and len(report.skipped) == 2
    assert any("not JSON" in s for s in report.skipped) and any("outside the workspace" in s for s in report.skipped)
    suite = load_suite(report.path)
    total, notes = suite.get("task-00-sum-numbers"), suite.get("task-01-notes")
    assert total.metadata["original_id"] == "task_00_sum_numbers"
    assert notes.metadata["rule"] == "file notes.md must exist" and "{{name}}" in notes.instruction
    assert notes.workspace_dir is None
    assert (total.workspace_dir / "input" / "numbers.txt").read_text() == "10\n20\n30\n"
    assert not (total.workspace_dir / "reward").exists() and (total.hidden_dir / "test.py").is_file()

    async def score(task, cmd: str | None) -> float:
        cfg = SandboxConfig(workspace_src=task.workspace_dir, workspace_mount=task.workspace_mount)
        async with create_sandbox("bwrap", cfg) as sb:
            if cmd:
                await sb.exec(["bash", "-c", cmd], cwd=task.workspace_mount)
            return (await verify(task, sb, make_transcript(task))).score

    assert await score(total, None) == 0.0
    assert await score(total, "mkdir -p output && echo 50 > output/total.txt") == 0.5
    assert await score(total, "mkdir -p output && echo 60 > output/total.txt") == 1.0
    assert await score(notes, "echo hi Ada > notes.md") == 1.0


def test_officeqa_import_builds_answer_tasks_with_documents(tmp_path: Path) -> None:
    report = import_suite(
        "officeqa", FIXTURES / "officeqa" / "officeqa.csv", "oqa", tmp_path, docs=FIXTURES / "officeqa" / "docs", skip_invalid=True
    )
    assert report.tasks == 3 and len(report.skipped) == 1 and "no_such_file.txt" in report.skipped[0]
    suite = load_suite(report.path)
    debt = suite.get("uid0001")
    (ans,) = debt.verifiers
    assert isinstance(ans, AnswerVerifier) and ans.expected == ["233.95 billion"]
    assert (ans.tolerance, ans.tag, ans.rule) == (0.0, "FINAL_ANSWER", "officeqa")  # the official defaults
    assert debt.difficulty == "easy" and debt.category == "easy" and debt.metadata["uid"] == "UID0001"
    assert [p.name for p in (debt.workspace_dir / "docs").iterdir()] == ["treasury_bulletin_1945_03.txt"]  # .pdf -> parsed .txt
    assert "docs/treasury_bulletin_1945_03.txt" in debt.instruction and "<FINAL_ANSWER>" in debt.instruction
    assert debt.solution_path is not None
    assert debt.solution_path.read_text().strip() == "<FINAL_ANSWER>233.95 billion</FINAL_ANSWER>"
    both = suite.get("uid0003")
    assert sorted(p.name for p in (both.workspace_dir / "docs").iterdir()) == ["annual_report_2020.txt", "treasury_bulletin_1945_03.txt"]
    assert both.difficulty == "medium"
    assert load_suite(report.path).spec.metadata["tolerance"] == 0.0 and any("tolerance 0" in m for m in report.mapped)
    pro = import_suite(
        "officeqa",
        FIXTURES / "officeqa" / "officeqa.csv",
        "oqa-pro",
        tmp_path,
        docs=FIXTURES / "officeqa" / "docs",
        skip_invalid=True,
        split="pro",
        tolerance=0.01,
        tag="answer",
    )
    (hard,) = load_suite(pro.path).tasks
    assert hard.id == "uid0002" and hard.verifiers[0].tolerance == 0.01 and hard.verifiers[0].tag == "answer"
    with pytest.raises(ConfigError, match="not one of OfficeQA's levels"):
        import_suite("officeqa", FIXTURES / "officeqa" / "officeqa.csv", "bad", tmp_path, tolerance=0.02)


def _one_percent_off(answer: str) -> str:
    """The reference with every number 1 % larger (0 becomes 0.01)."""

    def bump(m: re.Match[str]) -> str:
        value = float(m.group(0).replace(",", "").replace("\u2212", "-"))
        return repr(round(value * 1.01, 9) if value else 0.01)

    return re.sub(r"[-\u2212]?\d[\d,]*(?:\.\d+)?", bump, answer)


@pytest.mark.sandbox
async def test_the_246_real_officeqa_questions_score_the_reference_1_and_one_percent_off_0(tmp_path: Path) -> None:
    """The real question set with placeholder documents (the bulletins are not public here), imported with
    the defaults: each task scores its reference solution 1.0 and the same answer 1 % off 0.0."""
    from tests.conftest import shared_data_dir

    questions = shared_data_dir() / "officeqa" / "officeqa_full.csv"
    docs = tmp_path / "docs"
    docs.mkdir()
    with questions.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            for name in re.split(r"[\n,;|]", row["source_files"]):
                if name.strip():
                    (docs / name.strip()).write_text("Placeholder: the bulletin is not distributed here.\n")
    report = import_suite("officeqa", questions, "officeqa-full", tmp_path / "out", docs=docs)
    suite = load_suite(report.path)
    assert report.tasks == len(suite.tasks) == 246 and not report.skipped
    assert {t.category for t in suite.tasks} == {"easy", "hard"}
    cfg = SandboxConfig(workspace_src=None, workspace_mount="/workspace")
    async with create_sandbox("bwrap", cfg) as sb:
        for task in suite.tasks:
            reference = task.solution_path.read_text()
            expected = task.verifiers[0].expected[0]
            good = await run_verifiers(task, sb, make_transcript(task, f"Worked it out.\n{reference}"))
            off = await run_verifiers(task, sb, make_transcript(task, f"<FINAL_ANSWER>{_one_percent_off(expected)}</FINAL_ANSWER>"))
            assert (good.score, off.score) == (1.0, 0.0), (task.id, expected, _one_percent_off(expected), off.details)


def test_officeqa_missing_columns_is_a_clear_error(tmp_path: Path) -> None:
    csv = tmp_path / "x.csv"
    csv.write_text("uid,question\n1,q\n")
    with pytest.raises(ConfigError, match="answer, source_files missing"):
        import_suite("officeqa", csv, "oqa", tmp_path / "out")
    assert not (tmp_path / "out" / "oqa").exists()


def test_pull_offline_fails_fast_and_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clawgym_env.authoring.importers.clawgym_hf import download_clawgym_bench

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    t0 = time.monotonic()
    with pytest.raises(TaskError) as info:
        download_clawgym_bench()
    assert time.monotonic() - t0 < 10
    msg = str(info.value)
    assert "HF_HUB_OFFLINE" in msg and "RUC-AIBOX/ClawGym-Task" in msg and "clawgym tasks import clawgym-hf" in msg


def test_pull_cli_offline_exits_nonzero_with_the_message(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "CLAWGYM_SUITES_DIR": str(tmp_path / "s")}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "clawgym_env.cli.main", "tasks", "pull", "clawgym-bench"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 1 and time.monotonic() - t0 < 30
    assert "cannot pull" in proc.stderr and "not in the local Hugging Face cache" in proc.stderr
    assert not (tmp_path / "s" / "clawgym-bench").exists()


def _clawgym_task(root: Path, name: str, sample_dir: Path) -> Path:
    import shutil

    shutil.copytree(sample_dir / "task_0000", root / name, symlinks=True)
    entry = json.loads((root / name / "data_entry.json").read_text())
    (root / name / "data_entry.json").write_text(json.dumps({**entry, "task_id": name}))
    return root / name


def test_clawgym_import_keeps_inner_links_and_refuses_outward_ones(sample_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    inner = _clawgym_task(src, "inner", sample_dir)
    (inner / "input_files").mkdir(exist_ok=True)
    (inner / "input_files" / "real.txt").write_text("data\n")
    (inner / "input_files" / "alias.txt").symlink_to("real.txt")
    outward = _clawgym_task(src, "outward", sample_dir)
    (outward / "input_files").mkdir(exist_ok=True)
    (outward / "input_files" / "passwd").symlink_to("/etc/passwd")
    _clawgym_task(src, "dotdot", sample_dir)
    (src / "dotdot" / "reward" / "up").symlink_to("../../outward/data_entry.json")
    (src / "notes").mkdir()  # a folder that is not a task at all
    (src / "notes" / "README").write_text("x")
    with pytest.raises(ImportInvalidError) as err:
        import_suite("clawgym", src, "links", tmp_path / "out")
    msg = str(err.value)
    # every bad entry is listed with its source file (never a staging path) and the reason
    assert "3 invalid task(s)" in msg and str(outward / "input_files" / "passwd") in msg and "/etc/passwd" in msg
    assert str(src / "dotdot" / "reward" / "up") in msg and f"{src / 'notes'}: no data_entry.json" in msg
    assert ".importing-" not in msg and "--skip-invalid" in msg
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    report = import_suite("clawgym", src, "links", tmp_path / "out", skip_invalid=True)
    assert report.tasks == 1 and len(report.skipped) == 3
    (task,) = load_suite(report.path).tasks
    alias = task.workspace_dir / "alias.txt"
    assert alias.is_symlink() and Path(alias).readlink() == Path("real.txt") and alias.read_text() == "data\n"
    copied = [p for p in report.path.rglob("*") if p.is_file() and "root:x:0:0" in p.read_text(errors="replace")]
    assert copied == []  # /etc/passwd never lands in the suite


def test_clawgym_import_error_names_the_source_file(sample_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    bad = _clawgym_task(src, "broken", sample_dir)
    (bad / "data_entry.json").write_text("{not json")
    with pytest.raises(ImportInvalidError, match=re.escape(str(bad / "data_entry.json"))):
        import_suite("clawgym", src, "broken", tmp_path / "out")
