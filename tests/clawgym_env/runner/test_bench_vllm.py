"""`clawgym bench run` against a real vLLM CPU server (tier ``vllm``), through custom and Claude Code.

CI runs Claude Code as ``claude-code-bash``: the same unmodified binary with ``--tools Bash``, whose
first prompt is 3.2k SmolLM2 tokens (~28 s of one core to prefill on vLLM's CPU build). The full
tool set (``claude-code``) sends 12.4k tokens, several minutes of prefill on that core: run it by
hand with ``CLAWGYM_VLLM_HARNESSES=custom,claude-code,claude-code-bash`` (the copied tasks get a
15-minute wall time for it).

With 24 output tokens every Claude Code call stops on length; Claude Code then sends its own
"Output token limit hit" turn, three times, and exits 1. That ending is deterministic (whatever the
date in its prompt makes SmolLM2 say) and gives a four-call episode; the test accepts it only in
that form, with every call captured, and no other error.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgym_env.capture import read_capture
from clawgym_env.cli.main import app
from clawgym_env.results import AttemptResult
from tests.conftest import RealVLLM, with_wall_time

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.harness, pytest.mark.sandbox]

MAX_TOKENS = 24


def test_bench_run_captures_ids_and_logprobs(real_vllm: RealVLLM, tmp_path: Path) -> None:
    from tests.clawgym_env.runner.runner_smoke import copy_smoke_suite

    harnesses = os.environ.get("CLAWGYM_VLLM_HARNESSES", "custom,claude-code-bash")
    suite = with_wall_time(copy_smoke_suite(tmp_path / "smoke"), tmp_path / "suite")
    out = tmp_path / "run"
    r = CliRunner().invoke(
        app,
        [
            "bench",
            "run",
            "--model",
            real_vllm.spec,
            "--harness",
            harnesses,
            "--suite",
            str(suite),
            "--tasks",
            "smoke-hello-file-p0",
            "--max-tokens",
            str(MAX_TOKENS),
            "--seed",
            "0",
            "--concurrency",
            "2",
            "--out",
            str(out),
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    attempts = [AttemptResult.model_validate_json(p.read_text()) for p in sorted((out / "attempts").glob("*.json"))]
    assert sorted(a.harness for a in attempts) == sorted(harnesses.split(","))
    for a in attempts:
        calls = [c.model_dump() for c in read_capture(out / "captures" / f"{a.session_id}.jsonl")]  # format 2: lines hold deltas
        assert calls and a.model_calls == len(calls)
        for c in calls:
            assert c["error"] is None and c["token_source"] == "sampled", (a.harness, c["call_index"], c["error"])
            assert c["prompt_ids"] and c["completion_ids"], (a.harness, c["call_index"])
            assert len(c["logprobs"]) == len(c["completion_ids"]) and all(lp <= 0.0 for lp in c["logprobs"])
            assert len(c["completion_ids"]) <= MAX_TOKENS
        assert a.status != "timeout", (a.harness, a.error)
        if a.status == "error":  # only Claude Code's own exit after its output-limit retries (module doc)
            assert a.harness.startswith("claude-code") and a.episode_status == "crashed", (a.harness, a.error)
            assert a.error == "harness exited with code 1" and len(calls) > 1, (a.harness, a.error, len(calls))
            assert all(c["finish_reason"] == "length" for c in calls)
        if a.harness.startswith("claude-code"):  # one session: each prompt extends the last (vLLM's prefix cache serves it)
            assert all(later["prompt_ids"][: len(c["prompt_ids"])] == c["prompt_ids"] for c, later in zip(calls, calls[1:]))
