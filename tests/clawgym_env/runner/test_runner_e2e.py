"""The real path: scripted policy -> proxy -> custom harness in bwrap -> verifier, via the runner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_smoke import EXPECTED, POLICY, copy_smoke_suite

from clawgym_env.capture import read_capture
from clawgym_env.report.html import build_html
from clawgym_env.results import AttemptResult
from clawgym_env.runner import (
    RunConfig,
    RunSummary,
    load_attempts,
    resume,
    run_benchmark,
)

pytestmark = pytest.mark.sandbox


def config(out: Path, suite: Path, **kw: object) -> RunConfig:
    base: dict[str, object] = dict(
        model=f"scripted:{POLICY}", harnesses=["custom"], suite=str(suite), tasks="smoke-*", attempts=2, concurrency=4, out=str(out)
    )
    base.update(kw)
    return RunConfig(**base)  # type: ignore[arg-type]


def comparable(out: Path) -> list[dict[str, object]]:
    return [a.model_dump(exclude={"session_id", "timings", "started_at", "finished_at"}) for a in load_attempts(out)]


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> RunSummary:
    import asyncio

    root = tmp_path_factory.mktemp("e2e")
    return asyncio.run(run_benchmark(config(root / "clean", copy_smoke_suite(root)), progress=False))


def test_scripted_run_reproduces_expected_scores(clean_run: RunSummary) -> None:
    s = clean_run
    assert s.ran == 12 and len(s.attempts) == 12
    for a in s.attempts:
        score, subs = EXPECTED[a.task_id]
        assert (a.status, a.score, a.subscores) == ("passed" if score == 1.0 else "failed", score, subs), a
        assert a.model_calls == 2 and a.error is None
        assert {"sandbox", "harness", "verifier", "total"} <= set(a.timings)
        lines = (s.out_dir / "captures" / f"{a.session_id}.jsonl").read_text().splitlines()
        assert len(lines) == 2 and json.loads(lines[0])["session_id"] == a.session_id
    m = s.metrics.overall
    assert m.mean_score == pytest.approx(4 / 6) and m.pass_at[1] == pytest.approx(4 / 6)
    assert m.pass_at[2] == pytest.approx(4 / 6) and m.errors == 0 and m.failed == 4
    assert s.metrics.per_category["systems"].mean_score == 0.0
    assert s.manifest.harnesses["custom"] and s.manifest.suite == "clawgym-original" and s.manifest.suite_hash.startswith("sha256:")
    assert s.manifest.evaluation_only  # the scripted backend returns no token ids
    html = build_html(s.out_dir)
    assert "smoke-count-lines" in html and "count.txt" in html and "<svg" in html


def test_real_run_killed_and_resumed_equals_clean(clean_run: RunSummary, tmp_path: Path) -> None:
    import asyncio

    out = tmp_path / "killed"
    suite = copy_smoke_suite(tmp_path)
    cmd = [
        sys.executable,
        "-m",
        "clawgym_env.cli.main",
        "bench",
        "run",
        "--model",
        f"scripted:{POLICY}",
        "--harness",
        "custom",
        "--suite",
        str(suite),
        "--tasks",
        "smoke-*",
        "-k",
        "2",
        "--concurrency",
        "2",
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if (out / "attempts").is_dir() and len(list((out / "attempts").glob("*.json"))) >= 4:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and every sandbox it started
    finally:
        proc.wait()
    before = {p.name: p.read_bytes() for p in (out / "attempts").glob("*.json")}
    assert 4 <= len(before) < 12
    s = asyncio.run(resume(out, progress=False))
    assert s.ran == 12 - len(before)
    for name, data in before.items():
        assert (out / "attempts" / name).read_bytes() == data
    assert comparable(out) == comparable(clean_run.out_dir)
    assert s.manifest.suite_hash == clean_run.manifest.suite_hash
    sessions = {a.session_id for a in s.attempts}
    assert {p.name.split(".")[0] for p in (out / "captures").iterdir()} == sessions
    assert all(AttemptResult.model_validate_json(d).status != "error" for d in before.values())


def test_token_level_model_counts_exact_tokens(tmp_path: Path) -> None:
    """hf:tiny (a real, random-weight model) through the runner: token counts come from the capture."""
    import asyncio

    suite = copy_smoke_suite(tmp_path)
    s = asyncio.run(
        run_benchmark(
            RunConfig(
                model="hf:tiny",
                harnesses=["custom"],
                suite=str(suite),
                tasks="smoke-hello-file-p0",
                max_tokens=8,
                temperature=0.0,
                out=str(tmp_path / "tiny"),
            ),
            progress=False,
        )
    )
    (a,) = s.attempts
    assert not s.manifest.evaluation_only and s.manifest.model_info["token_level"] is True
    assert s.manifest.sampling == {"max_tokens": 8, "temperature": 0.0}
    calls = [c.model_dump() for c in read_capture(s.out_dir / "captures" / f"{a.session_id}.jsonl")]  # format 2: lines hold deltas
    done = [c for c in calls if c["completion_ids"]]
    assert done and all(len(c["completion_ids"]) <= 8 for c in done)
    assert a.model_calls == len(calls)
    assert a.prompt_tokens == sum(len(c["prompt_ids"] or []) for c in calls) > 0
    assert a.completion_tokens == sum(len(c["completion_ids"] or []) for c in calls) > 0


def test_seeded_attempts_sample_independently_and_reproducibly(tmp_path: Path) -> None:
    """--seed with k > 1 at T > 0: each attempt draws its own tokens (the run's seed sent as is made all k
    attempts one sample), and the same seed gives the same tokens again."""
    import asyncio

    suite = copy_smoke_suite(tmp_path)

    def first_completions(out: str) -> dict[int, list[int]]:
        s = asyncio.run(
            run_benchmark(
                RunConfig(
                    model="hf:tiny",
                    harnesses=["custom"],
                    suite=str(suite),
                    tasks="smoke-hello-file-p0",
                    attempts=3,
                    max_tokens=12,
                    temperature=1.0,
                    seed=7,
                    out=str(tmp_path / out),
                ),
                progress=False,
            )
        )
        assert s.manifest.sampling["seed"] == 7
        got = {}
        for a in s.attempts:
            lines = (s.out_dir / "captures" / f"{a.session_id}.jsonl").read_text().splitlines()
            got[a.attempt] = json.loads(lines[0])["completion_ids"]
        return got

    one = first_completions("one")
    assert len({tuple(ids) for ids in one.values()}) == 3, one
    assert first_completions("two") == one
