"""Episodes served by the real HF backend with the tiny model: whatever the model says, the episode
ends cleanly and every call is captured with exact token ids and logprobs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from clawgym_env.episode import EpisodeResult, run_episode
from clawgym_env.task import load_suite

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def tiny_backend() -> Any:
    from clawgym_env.models import tiny_model_path
    from clawgym_env.proxy.backends.hf import HFBackend

    return HFBackend(tiny_model_path(), seed=0)


def assert_token_capture(result: EpisodeResult) -> None:
    assert result.calls, (result.status, result.error, result.harness_output_tail[-1500:])
    for c in result.calls:
        assert c.error is None, c.error
        assert c.token_source == "sampled"
        assert c.prompt_ids and c.completion_ids and c.logprobs is not None
        assert len(c.logprobs) == len(c.completion_ids)
        assert all(math.isfinite(lp) and lp <= 0.0 for lp in c.logprobs)
    assert result.capture_path is not None
    assert len(result.capture_path.read_text().splitlines()) == len(result.calls)


async def run(harness: str, backend: Any, suite: Path, tmp_path: Path, max_tokens: int) -> EpisodeResult:
    spec = load_suite(suite).get("hello-file")
    return await run_episode(spec, harness, backend, capture_dir=tmp_path, sampling={"max_tokens": max_tokens, "seed": 0})


async def test_custom_loop_with_tiny_model(tiny_backend: Any, smoke_suite: Path, tmp_path: Path) -> None:
    result = await run("custom", tiny_backend, smoke_suite, tmp_path, max_tokens=32)
    assert result.status == "completed", result.error  # the loop ends when the model answers without tools
    assert_token_capture(result)
    assert result.timings["model"] > 0


@pytest.mark.slow
@pytest.mark.harness
@pytest.mark.parametrize("harness", ["claude-code", "openclaw", "codex", "gemini-cli", "opencode", "pi", "mini-swe-agent"])
async def test_real_harness_with_tiny_model(harness: str, tiny_backend: Any, smoke_suite: Path, tmp_path: Path) -> None:
    """~0.5-2 min each on CPU: Claude Code's prompt is ~30k tiny-tokenizer tokens per call."""
    result = await run(harness, tiny_backend, smoke_suite, tmp_path, max_tokens=48)
    # A random tiny model may make the harness give up (exit 1, "crashed") or keep calling until the task's
    # budget stops it ("truncated"); the episode must still end cleanly.
    assert result.status in ("completed", "crashed", "truncated"), result.error
    assert_token_capture(result)
    if len(result.calls) > 1:
        assert any(c.reused_prompt_tokens > 0 for c in result.calls[1:])  # TITO splices earlier ids


@pytest.mark.slow
@pytest.mark.harness
async def test_qwen_code_prompt_over_the_tiny_models_context_is_refused_cleanly(
        tiny_backend: Any, smoke_suite: Path, tmp_path: Path) -> None:
    """Qwen Code's first prompt is ~45k tiny-tokenizer tokens, over the tiny model's 32,768 positions: the call
    is refused with the reason recorded (Qwen Code retries until the task's call budget stops it), nothing
    left running.
    (With the SmolLM2 tokenizer and a scripted policy its captures are token-level: bench/harness_matrix.py.)"""
    result = await run("qwen-code", tiny_backend, smoke_suite, tmp_path, max_tokens=48)
    assert result.status in ("error", "truncated") and result.calls, result.error
    assert all("exceeds the model's 32768 positions" in (c.error or "") for c in result.calls if c.status != 400)
    assert result.calls[0].prompt_ids and len(result.calls[0].prompt_ids) > 32768
