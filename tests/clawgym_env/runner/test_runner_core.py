"""Runner logic with the named fake worker: plan, folder format, concurrency, kill + resume."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_fakes import BuggyWorker, FakeEpisodeWorker, fake_outcome

from clawgym_env.errors import ConfigError, RunError
from clawgym_env.metrics import compute_metrics
from clawgym_env.results import AttemptResult, attempt_filename
from clawgym_env.runner import RunConfig, load_attempts, resume, run_benchmark

HERE = Path(__file__).parent
FAKE = "runner_fakes:FakeEpisodeWorker"


def cfg(out: Path, **kw: object) -> RunConfig:
    base: dict[str, object] = dict(
        model="scripted:fake", harnesses=["custom", "other"], suite="fake:6", attempts=3, concurrency=4, out=str(out), worker=FAKE
    )
    base.update(kw)
    return RunConfig(**base)  # type: ignore[arg-type]


def comparable(out: Path) -> list[dict[str, object]]:
    """Attempt records without what legitimately differs between two runs (ids, clocks)."""
    rows = []
    for a in load_attempts(out):
        d = a.model_dump(exclude={"session_id", "timings", "started_at", "finished_at"})
        rows.append(d)
    return rows


async def test_run_writes_the_results_folder(tmp_path: Path) -> None:
    FakeEpisodeWorker.max_running = 0
    s = await run_benchmark(cfg(tmp_path / "r", save_workspaces=True), progress=False)
    out = tmp_path / "r"
    assert s.ran == 36 and len(s.attempts) == 36
    man = json.loads((out / "manifest.json").read_text())
    assert man["suite"] == "fake" and man["suite_hash"] == "f" * 64 and man["attempts"] == 3
    assert man["harnesses"] == {"custom": "0.0-fake", "other": "0.0-fake"} and man["model"] == "scripted:fake"
    assert man["pass_threshold"] == 1.0 and man["machine"]["cpus"] >= 1 and man["clawgym_version"]
    assert len(man["task_ids"]) == 6
    assert json.loads((out / "config.json").read_text())["worker"] == FAKE
    for a in s.attempts:
        st, sc = fake_outcome(a.task_id, a.harness, a.attempt)
        assert (a.status, a.score) == (st, sc)
        assert (out / "attempts" / attempt_filename(a.task_id, a.harness, a.attempt)).is_file()
        assert len((out / "captures" / f"{a.session_id}.jsonl").read_text().splitlines()) == 2
        assert (out / "workspaces" / attempt_filename(a.task_id, a.harness, a.attempt)[:-5] / "out.txt").is_file()
    assert not list((out / "attempts").glob(".tmp-*"))
    assert FakeEpisodeWorker.max_running == 4
    assert s.metrics.overall.pass_at[1] == compute_metrics(s.attempts, 1.0).overall.pass_at[1]
    assert s.metrics.overall.errors == sum(a.status == "error" for a in s.attempts) > 0
    # a finished run resumes to nothing
    again = await resume(out, progress=False)
    assert again.ran == 0 and comparable(out) == [
        a.model_dump(exclude={"session_id", "timings", "started_at", "finished_at"}) for a in s.attempts
    ]


async def test_task_pattern_and_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="attempts"):
        cfg(tmp_path, attempts=0)
    with pytest.raises(ConfigError, match="executor"):
        cfg(tmp_path, executor="slurm")
    with pytest.raises(ConfigError, match="repeats"):
        cfg(tmp_path, harnesses="custom,custom")
    with pytest.raises(ConfigError, match="--temperature must be >= 0"):
        cfg(tmp_path, temperature=-1.0)
    with pytest.raises(ConfigError, match="--top-p"):
        cfg(tmp_path, top_p=0.0)
    with pytest.raises(ConfigError, match="--max-tokens"):
        cfg(tmp_path, max_tokens=0)
    await run_benchmark(cfg(tmp_path / "a", attempts=1), progress=False)
    with pytest.raises(RunError, match="another run"):
        await run_benchmark(cfg(tmp_path / "a", attempts=1, model="scripted:other"), progress=False)
    with pytest.raises(RunError, match="no manifest"):
        await resume(tmp_path / "nothing", progress=False)


async def test_a_worker_bug_stops_the_run_and_keeps_finished_attempts(tmp_path: Path) -> None:
    BuggyWorker.calls = 0
    with pytest.raises(ExceptionGroup) as ei:
        await run_benchmark(cfg(tmp_path / "b", worker="runner_fakes:BuggyWorker", concurrency=1), progress=False)
    assert "bug in worker" in str(ei.value.exceptions[0])
    assert len(load_attempts(tmp_path / "b")) == 4  # the four before the bug, none invented for it
    s = await resume(tmp_path / "b", progress=False)  # the bug is gone on the 2nd process (calls > 5)
    assert s.ran == 32 and len(s.attempts) == 36


_CHILD = """
import asyncio, sys
from clawgym_env.runner import RunConfig, run_benchmark
asyncio.run(run_benchmark(RunConfig(model="scripted:fake", harnesses=["custom", "other"], suite="fake:6",
    attempts=3, concurrency=3, out=sys.argv[1], worker="runner_fakes:FakeEpisodeWorker"), progress=False))
"""


def test_sigkill_mid_run_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "FAKE_EPISODE_S": "0.15"}
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(killed)], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            n = len(list((killed / "attempts").glob("*.json"))) if (killed / "attempts").is_dir() else 0
            if n >= 7:
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    before = {p.name: p.read_bytes() for p in (killed / "attempts").glob("*.json")}
    assert 7 <= len(before) < 36, len(before)
    # killed mid-episode: captures of unfinished attempts are on disk
    sessions = {AttemptResult.model_validate_json(b).session_id for b in before.values()}
    assert {p.stem for p in (killed / "captures").glob("*.jsonl")} - sessions

    s = asyncio.run(resume(killed, progress=False))
    assert s.ran == 36 - len(before)
    for name, data in before.items():  # finished attempts were neither lost nor rerun
        assert (killed / "attempts" / name).read_bytes() == data
    # no capture is left from the killed episodes, every attempt has its own
    assert {p.stem for p in (killed / "captures").glob("*.jsonl")} == {a.session_id for a in s.attempts}

    clean = asyncio.run(run_benchmark(cfg(tmp_path / "clean", concurrency=3), progress=False))
    assert comparable(killed) == comparable(clean.out_dir)

    def figures(d: dict) -> dict:  # type: ignore[type-arg]
        return {
            g: {k: {f: v for f, v in m.items() if f != "total_time_s"} for k, m in d[g].items()}
            for g in ("per_harness", "per_category", "per_task")
        }

    assert figures(s.metrics.to_dict()) == figures(clean.metrics.to_dict())
    assert s.metrics.overall.pass_at == clean.metrics.overall.pass_at


async def test_resume_a_run_killed_before_its_manifest(tmp_path: Path) -> None:
    out = tmp_path / "early"
    await run_benchmark(cfg(out, attempts=1), progress=False)
    (out / "manifest.json").unlink()
    for p in (out / "attempts").glob("*.json"):
        p.unlink()
    s = await resume(out, progress=False)
    assert s.ran == 12 and (out / "manifest.json").is_file()


def test_progress_lines_in_logs() -> None:
    import io

    from rich.console import Console

    from clawgym_env.report.progress import RunProgress

    buf = io.StringIO()
    p = RunProgress(
        total=3,
        already=[AttemptResult(task_id="s/a", harness="h", attempt=0, status="passed", score=1.0)],
        console=Console(file=buf, width=200),
    )
    with p:
        p.started(None)  # type: ignore[arg-type]
        assert p.running == 1
        p.finished(AttemptResult(task_id="s/b", harness="h", attempt=0, status="error", score=0.0, completion_tokens=5))
    text = buf.getvalue()
    assert "[2/3] s/b h #0: error 0.000" in text and "passed 1" in text and "errors 1" in text
    assert p.running == 0 and p.tokens == 5
