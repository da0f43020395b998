"""`clawgym bench run` against a real vLLM CPU server (tier ``vllm``).

Custom harness only in CI: Claude Code's first prompt is ~12.4k SmolLM2 tokens, and vLLM's CPU
build (one core, eager fp32) did not finish that prefill within 7 minutes on this busy 2-core box;
run ``CLAWGYM_VLLM_HARNESSES=custom,claude-code`` by hand on an idle machine (the copied smoke
task gets a 15-minute wall time for it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import yaml

from clawgym_env.cli.main import app
from clawgym_env.results import AttemptResult
from tests.conftest import RealVLLM

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.harness, pytest.mark.sandbox]


def test_bench_run_captures_ids_and_logprobs(real_vllm: RealVLLM, tmp_path: Path) -> None:
    import os

    harnesses = os.environ.get("CLAWGYM_VLLM_HARNESSES", "custom")
    from tests.clawgym_env.runner.runner_smoke import copy_smoke_suite

    suite = copy_smoke_suite(tmp_path / "suite")
    spec_file = suite / "smoke-hello-file" / "task.yaml"
    spec = yaml.safe_load(spec_file.read_text())
    spec["limits"]["wall_time_s"] = 900
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["bench", "run", "--model", real_vllm.spec, "--harness", harnesses,
                                 "--suite", str(suite), "--tasks", "smoke-hello-file-p0", "--max-tokens", "24",
                                 "--seed", "0", "--concurrency", "2", "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    attempts = [AttemptResult.model_validate_json(p.read_text()) for p in sorted((out / "attempts").glob("*.json"))]
    assert {a.harness for a in attempts} == set(harnesses.split(","))
    for a in attempts:
        assert a.status not in ("error", "timeout"), (a.harness, a.status, a.error)
        calls = [json.loads(line) for line in (out / "captures" / f"{a.session_id}.jsonl").read_text().splitlines()]
        assert calls and a.model_calls == len(calls)
        for c in calls:
            assert c["error"] is None and c["token_source"] == "sampled", (a.harness, c["call_index"], c["error"])
            assert c["prompt_ids"] and c["completion_ids"], (a.harness, c["call_index"])
            assert len(c["logprobs"]) == len(c["completion_ids"]) and all(lp <= 0.0 for lp in c["logprobs"])
            assert len(c["completion_ids"]) <= 24
