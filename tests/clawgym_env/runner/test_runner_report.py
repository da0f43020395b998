"""Reports and the bench CLI over results folders made by the fake worker; EpisodeResult mapping."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgym_env.capture.records import CallRecord
from clawgym_env.cli.main import app
from clawgym_env.report.html import build_html, load_trajectory
from clawgym_env.runner import (
    AttemptJob,
    RunConfig,
    RunSummary,
    episode_to_attempt,
    run_benchmark,
)

FAKE = "runner_fakes:FakeEpisodeWorker"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunSummary, RunSummary]:
    import asyncio

    root = tmp_path_factory.mktemp("reports")
    a = asyncio.run(
        run_benchmark(
            RunConfig(model="scripted:a", harnesses=["custom", "other"], suite="fake:5", attempts=2, out=str(root / "a"), worker=FAKE),
            progress=False,
        )
    )
    b = asyncio.run(
        run_benchmark(
            RunConfig(model="scripted:b", harnesses=["custom"], suite="fake:5", attempts=3, out=str(root / "b"), worker=FAKE),
            progress=False,
        )
    )
    return a, b


def test_html_report_is_self_contained_with_plots_and_trajectories(two_runs: tuple[RunSummary, RunSummary]) -> None:
    a, _ = two_runs
    html = build_html(a.out_dir)
    assert "<script src" not in html and "<link" not in html and "http://" not in html.replace("http://www.w3.org", "")
    assert html.count("<svg") == 4
    data = json.loads(
        re.search(r'<script type="application/json" id="trajectories">(.*?)</script>', html, re.DOTALL).group(1).replace("<\\/", "</")
    )  # type: ignore[union-attr]
    assert len(data) == 20
    one = data[0]
    assert one["calls"][1]["response"]["content"] == "step 1" and one["calls"][1]["shared_messages"] == 1
    assert one["calls"][0]["prompt_tokens"] == 4 and one["subscores"] == {"grade/done": one["score"]}
    # the metrics table shows the recomputed Pass@1
    assert f"{a.metrics.overall.pass_at[1]:.3f}" in html


def test_trajectory_of_a_damaged_capture(tmp_path: Path) -> None:
    cap = tmp_path / "s.jsonl"
    rec = CallRecord(
        session_id="s",
        call_index=0,
        dialect="anthropic",
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi </script>"}]}],
        response={"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "Write", "arguments": {"file_path": "a"}}}]},
    )
    cap.write_text(rec.model_dump_json() + "\n{not json\n")
    calls = load_trajectory(cap)
    assert calls[0]["new_messages"][0]["content"] == "hi </script>"
    assert calls[0]["response"]["tool_calls"] == [{"name": "Write", "arguments": '{"file_path": "a"}'}]
    assert calls[1] == {"index": 1, "error": "unreadable capture line"}
    assert load_trajectory(tmp_path / "missing.jsonl") == []


def test_cli_report_compare_and_errors(two_runs: tuple[RunSummary, RunSummary], tmp_path: Path) -> None:
    a, b = two_runs
    r = CliRunner().invoke(app, ["bench", "report", str(a.out_dir), "--html", str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    assert "pass rule" in r.output and "custom" in r.output and (tmp_path / "r.html").stat().st_size > 1000
    r = CliRunner().invoke(app, ["bench", "compare", str(a.out_dir), str(b.out_dir)])
    assert r.exit_code == 0, r.output
    assert "harness other" in r.output and "scripted:b" in r.output
    assert "changed most" in r.output and "fake/task-0" in r.output
    r = CliRunner().invoke(app, ["bench", "report", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no manifest.json" in r.output


def test_cli_report_of_several_folders_is_one_row_each(two_runs: tuple[RunSummary, RunSummary], tmp_path: Path) -> None:
    """An experiment's stages side by side: the counts are recomputed from each folder's attempt records."""
    import shutil

    a, b = two_runs
    half = tmp_path / "half"
    shutil.copytree(b.out_dir, half)
    gone = sorted((half / "attempts").glob("*.json"))[0]
    passed_gone = json.loads(gone.read_text())["status"] == "passed"
    gone.unlink()
    r = CliRunner().invoke(app, ["bench", "report", str(a.out_dir), str(half)], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    rows = {line.split()[0]: line.split() for line in r.output.splitlines() if line.strip().startswith(str(tmp_path.anchor))}
    ra, rh = rows[str(a.out_dir)], rows[str(half)]
    # run tasks k T n pass score% p@1% p@k% err unfinished
    assert ra[2] == "2" and ra[4] == "20" and int(ra[5]) == a.metrics.overall.passed and ra[10] == "0"
    assert ra[8] == f"{100 * a.metrics.overall.pass_at[2]:.1f}"
    assert rh[2] == "3" and rh[4] == "14" and int(rh[5]) == b.metrics.overall.passed - passed_gone and rh[10] == "1"
    r = CliRunner().invoke(app, ["bench", "report", str(a.out_dir), str(half), "--html", str(tmp_path / "r.html")])
    assert r.exit_code == 2 and "one results folder" in r.output and not (tmp_path / "r.html").exists()


def test_cli_run_without_a_model_runs_the_model_as_shipped_and_with_its_adapter(tmp_path: Path) -> None:
    """`bench run` with no --model: two results folders (the embedded model, then with the packaged adapter) from one
    config, greedy, and the two side by side."""
    from clawgym_env.runner import load_manifest
    from clawgym_env.runner.first_run import ADAPTER, MAX_TOKENS

    out = tmp_path / "first"
    r = CliRunner().invoke(
        app, ["bench", "run", "--suite", "fake:3", "--out", str(out), "--no-progress", "--worker", FAKE], env={"COLUMNS": "300"}
    )
    assert r.exit_code == 0, r.output
    base, adapter = load_manifest(out / "base"), load_manifest(out / "adapter")
    assert (base.model, adapter.model) == ("default", f"default?adapter={ADAPTER}")
    assert base.sampling == adapter.sampling == {"max_tokens": MAX_TOKENS, "temperature": 0.0}
    assert base.task_ids == adapter.task_ids and len(list((out / "adapter" / "attempts").glob("*.json"))) == 3
    assert "A = base (default)" in r.output and "as shipped (A) and with its trained adapter (B)" in r.output
    r = CliRunner().invoke(
        app,
        ["bench", "run", "--model", "scripted:x", "--suite", "fake:2", "--out", str(tmp_path / "one"), "--no-progress", "--worker", FAKE],
    )
    assert r.exit_code == 0 and (tmp_path / "one" / "manifest.json").is_file() and not (tmp_path / "one" / "base").exists()


def test_cli_run_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = CliRunner().invoke(
        app,
        [
            "bench",
            "run",
            "--model",
            "scripted:x",
            "--harness",
            "custom",
            "--suite",
            "fake:3",
            "-k",
            "2",
            "--out",
            str(out),
            "--no-progress",
            "--worker",
            FAKE,
        ],
    )
    assert r.exit_code == 0, r.output
    assert "6 attempts run" in r.output and len(list((out / "attempts").glob("*.json"))) == 6
    assert (out / "report.html").is_file()
    (out / "attempts" / "fake--task-01__custom__1.json").unlink()
    r = CliRunner().invoke(app, ["bench", "resume", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "1 attempts run" in r.output
    r = CliRunner().invoke(app, ["bench", "run", "-k", "0", "--out", str(tmp_path / "x"), "--worker", FAKE])
    assert r.exit_code == 2 and "attempts must be >= 1" in r.output


@dataclass
class FakeEpisodeResult:
    """Stands in for clawgym_env.episode.EpisodeResult (same fields the runner reads)."""

    status: str
    score: float = 0.0
    session_id: str = "s1"
    subscores: dict[str, float] = field(default_factory=dict)
    verifier_output: str = ""
    error: str | None = None
    calls: list[CallRecord] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    egress_attempts: list[str] = field(default_factory=list)
    limit_hit: str | None = None
    notes: list[str] = field(default_factory=list)


@pytest.mark.parametrize(
    ("status", "score", "want"),
    [
        ("completed", 1.0, "passed"),
        ("completed", 0.5, "failed"),
        ("crashed", 0.0, "error"),
        ("error", 0.0, "error"),
        ("timeout", 1.0, "timeout"),
        ("truncated", 0.25, "truncated"),
        ("exploded", 0.0, "error"),
    ],
)
def test_episode_status_mapping(status: str, score: float, want: str) -> None:
    calls = [
        CallRecord(session_id="s1", call_index=i, dialect="openai-chat", prompt_ids=[1] * 10, completion_ids=[2] * 3) for i in range(2)
    ]
    ep = FakeEpisodeResult(status=status, score=score, calls=calls, timings={"sandbox": 0.1, "total": 2.0})
    a = episode_to_attempt(AttemptJob("s/t", "custom", 0, "c"), ep, 1.0, started="t0", elapsed=3.0)
    assert a.status == want and a.score == score and a.session_id == "s1"
    assert (a.model_calls, a.prompt_tokens, a.completion_tokens) == (2, 20, 6)
    assert a.timings == {"sandbox": 0.1, "total": 2.0}
    if status == "exploded":
        assert "unknown episode status" in (a.error or "")


def test_rubric_suite_without_judge_warns(tmp_path: Path) -> None:
    from clawgym_env.runner import EpisodeWorker

    suite = tmp_path / "mini"
    (suite / "memo").mkdir(parents=True)
    (suite / "suite.yaml").write_text("name: mini\npass_threshold: 0.5\n")
    (suite / "memo" / "task.yaml").write_text(
        "id: memo\nversion: 1\ncategory: content\ndifficulty: easy\ninstruction: Write memo.md\n"
        "verifiers:\n  - kind: rubric\n    items:\n      - {criterion: 'has a title', weight: 1}\n"
    )
    info = EpisodeWorker.describe_suite(RunConfig(suite=str(suite)))
    assert info.pass_threshold == 0.5 and [t.task_id for t in info.tasks] == ["mini/memo"]
    assert len(info.warnings) == 1 and "--judge" in info.warnings[0]
    assert EpisodeWorker.describe_suite(RunConfig(suite=str(suite), judge="scripted:j.yaml")).warnings == []


def test_tasks_take_several_patterns_comma_separated() -> None:
    """``--tasks a-0[12],b-*``: the union of what each pattern selects, in suite order."""
    from clawgym_env.runner import EpisodeWorker

    info = EpisodeWorker.describe_suite(RunConfig(suite="procgen-test", tasks="copy-file-01,make-folders-*"))
    assert [t.task_id for t in info.tasks] == ["procgen-test/copy-file-01", "procgen-test/make-folders-01", "procgen-test/make-folders-02"]


def test_cli_error_keeps_brackets() -> None:
    """Error text is printed literally: rich markup must not eat 'vllm:URL[#MODEL]' from the spec help."""
    r = CliRunner().invoke(app, ["bench", "run", "--model", "foo:bar"], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "unknown kind 'foo'" in r.output
    assert "vllm:URL[#MODEL]" in r.output


def test_cli_report_on_a_half_written_folder(two_runs: tuple[RunSummary, RunSummary], tmp_path: Path) -> None:
    import shutil

    half = tmp_path / "half"
    shutil.copytree(two_runs[0].out_dir, half)
    records = sorted((half / "attempts").glob("*.json"))
    records[0].unlink()  # killed before this attempt finished
    r = CliRunner().invoke(app, ["bench", "report", str(half)], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    assert f"incomplete run: {len(records) - 1} of {len(records)} attempts finished" in r.output
    assert f"clawgym bench resume {half}" in r.output
    records[1].write_text(records[1].read_text()[:40])  # torn write: one line, no pydantic dump
    r = CliRunner().invoke(app, ["bench", "report", str(half)], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "invalid attempt record (Invalid JSON" in r.output
    assert len(r.output.strip().splitlines()) == 1 and "errors.pydantic.dev" not in r.output
    (half / "manifest.json").write_text('{"suite": 1')
    r = CliRunner().invoke(app, ["bench", "report", str(half)], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "invalid manifest" in r.output and len(r.output.strip().splitlines()) == 1


def test_cli_run_refuses_a_bad_sandbox_or_out_before_running(tmp_path: Path) -> None:
    base = ["bench", "run", "--model", "scripted:x", "--suite", "fake:2", "--no-progress", "--worker", FAKE]
    r = CliRunner().invoke(app, [*base, "--sandbox", "bwarp", "--out", str(tmp_path / "a")], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "sandbox backend 'bwarp' is unknown" in r.output and "Did you mean 'bwrap'" in r.output
    assert not (tmp_path / "a").exists()
    (tmp_path / "f").write_text("x")
    r = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "f")], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "is a file, not a folder" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_cli_run_refuses_a_harness_that_is_not_installed(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        app,
        [
            "bench",
            "run",
            "--model",
            "scripted:x",
            "--harness",
            "claude-code",
            "--tasks",
            "smoke-hello*",
            "--no-progress",
            "--out",
            str(tmp_path / "run"),
        ],
        env={"COLUMNS": "300", "CLAWGYM_CACHE": str(tmp_path / "empty-cache")},
    )
    assert r.exit_code == 2 and "is not installed" in r.output and "clawgym harness install claude-code" in r.output
    assert not list((tmp_path / "run" / "attempts").glob("*.json"))
