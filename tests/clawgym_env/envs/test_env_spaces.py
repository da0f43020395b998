"""Spaces and the QueueBackend: the pieces of the Gym env that need no sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path

import gymnasium as gym
import pytest

import clawgym_env  # noqa: F401 - registers the ids
from clawgym_env.envs import ENV_IDS, QueueBackend, UnicodeText, token_ids_space
from clawgym_env.errors import ConfigError, HarnessError
from clawgym_env.proxy.backends.base import Completion, CompletionRequest


def test_ids_are_registered_on_import_as_nondeterministic() -> None:
    assert dict(ENV_IDS) == {
        "ClawGym/ClaudeCode-v0": "claude-code",
        "ClawGym/ClaudeCodeBash-v0": "claude-code-bash",
        "ClawGym/OpenClaw-v0": "openclaw",
        "ClawGym/Custom-v0": "custom",
        "ClawGym/Codex-v0": "codex",
        "ClawGym/GeminiCli-v0": "gemini-cli",
        "ClawGym/QwenCode-v0": "qwen-code",
        "ClawGym/OpenCode-v0": "opencode",
        "ClawGym/Pi-v0": "pi",
        "ClawGym/MiniSweAgent-v0": "mini-swe-agent",
    }
    for env_id, harness in ENV_IDS.items():
        spec = gym.spec(env_id)
        assert spec.kwargs == {"harness": harness}
        assert spec.entry_point == "clawgym_env.envs.harness_env:ClawGymEnv"
        assert spec.nondeterministic


def test_unicode_text_accepts_any_string_within_length() -> None:
    space = UnicodeText(max_length=10)
    assert space.contains("héllo ✓ 世界")
    assert space.contains("")
    assert not space.contains("x" * 11)
    assert not space.contains(b"bytes")
    space.seed(0)
    sample = space.sample()
    assert isinstance(sample, str) and space.contains(sample)


def test_token_ids_space_holds_tuples_of_ids() -> None:
    space = token_ids_space(100)
    assert space.contains((1, 2, 99))
    assert not space.contains((1, 100))
    assert space.contains(())


async def test_queue_backend_hands_each_call_out_and_waits() -> None:
    backend = QueueBackend()
    assert backend.TOKEN_LEVEL is False and backend.tokenizer is None
    req = CompletionRequest(session_id="s", call_index=0, prompt_ids=None, messages=[{"role": "user", "content": "hi"}])
    answer = asyncio.ensure_future(backend.handle(req))
    pending = await asyncio.wait_for(backend.queue.get(), 5)
    assert pending.request is req and not answer.done()
    pending.future.set_result(Completion(completion_ids=None, logprobs=None, text="hello"))
    assert (await asyncio.wait_for(answer, 5)).text == "hello"


async def test_queue_backend_aclose_cancels_waiting_calls() -> None:
    backend = QueueBackend(tokenizer=object())
    assert backend.TOKEN_LEVEL is True
    req = CompletionRequest(session_id="s", call_index=0, prompt_ids=[1], messages=[])
    answer = asyncio.ensure_future(backend.handle(req))
    await asyncio.sleep(0)
    await backend.aclose()
    await asyncio.sleep(0)
    assert answer.cancelled()


SUITE = str(Path(__file__).parents[2] / "harnesses" / "tasks" / "h6-smoke")


def test_actions_are_validated_before_reaching_the_harness() -> None:
    with gym.make("ClawGym/Custom-v0", suite=SUITE) as env:
        inner = env.unwrapped
        text = inner._to_completion("plain answer")
        assert (text.text, text.completion_ids, text.token_source) == ("plain answer", None, "none")
        turn = inner._to_completion({"text": "hi", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]})
        assert turn.structured["tool_calls"][0]["name"] == "bash"
        for bad, why in (({"completion_ids": [1]}, "needs a tokenizer"), ({"txt": "x"}, "unknown keys"), (3, "expected str or dict")):
            with pytest.raises(ConfigError, match=why):
                inner._to_completion(bad)
        observation_keys = set(env.observation_space.spaces)
        assert observation_keys == {"messages", "tools"}


def test_reset_reports_a_harness_that_cannot_start(tmp_path: Path) -> None:
    with gym.make("ClawGym/ClaudeCode-v0", suite=SUITE, task="hello-file", cache_dir=tmp_path) as env:
        with pytest.raises(HarnessError, match="clawgym harness install claude-code"):
            env.reset(seed=0)
