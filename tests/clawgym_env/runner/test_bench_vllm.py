"""`clawgym bench run` through the custom harness and Claude Code against a real vLLM CPU server (tier ``vllm``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgym_env.cli.main import app
from clawgym_env.results import AttemptResult
from tests.conftest import RealVLLM

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.harness, pytest.mark.sandbox]


def test_bench_run_through_custom_and_claude_code(real_vllm: RealVLLM, tmp_path: Path) -> None:
    from clawgym_env.harness_install import cache_root

    if not list((cache_root() / "harnesses").glob("anthropic-ai-claude-code-*")):
        pytest.fail("Claude Code is not installed; run `clawgym harness install claude-code`")
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["bench", "run", "--model", real_vllm.spec, "--harness", "custom,claude-code",
                                 "--tasks", "smoke-hello-file*", "--max-tokens", "24", "--seed", "0", "--concurrency", "2",
                                 "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    attempts = [AttemptResult.model_validate_json(p.read_text()) for p in sorted((out / "attempts").glob("*.json"))]
    assert {a.harness for a in attempts} == {"custom", "claude-code"}
    for a in attempts:
        assert a.status != "error", (a.harness, a.error)
        calls = [json.loads(line) for line in (out / "captures" / f"{a.session_id}.jsonl").read_text().splitlines()]
        assert calls and a.model_calls == len(calls)
        for c in calls:
            assert c["error"] is None and c["token_source"] == "sampled", (a.harness, c["call_index"], c["error"])
            assert c["prompt_ids"] and c["completion_ids"], (a.harness, c["call_index"])
            assert len(c["logprobs"]) == len(c["completion_ids"]) and all(lp <= 0.0 for lp in c["logprobs"])
            assert len(c["completion_ids"]) <= 24
