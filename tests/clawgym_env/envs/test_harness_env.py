"""ClawGymEnv over the real custom harness in real bwrap sandboxes: the Gym contract end to end."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import clawgym_env  # noqa: F401 - registers the ids
from clawgym_env.errors import ConfigError
from tests.sandbox_spy import assert_sandbox_dirs_gone, spy_on_sandboxes

pytestmark = pytest.mark.sandbox

SUITE = str(Path(__file__).parents[2] / "harnesses" / "tasks" / "h6-smoke")
WRITE_HELLO = {"tool_calls": [{"name": "write", "arguments": {"path": "hello.txt", "content": "hello world\n"}}]}


@pytest.fixture
def sandbox_dirs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Host folders of every sandbox the env's episodes create."""
    return spy_on_sandboxes(monkeypatch).dirs


def assert_nothing_left(env: Any, dirs: list[str]) -> None:
    inner = env.unwrapped
    assert inner._lt is None and inner._proxy is None
    assert not [t for t in threading.enumerate() if t.name == "clawgym-loop"], "the env's loop thread survived close()"
    assert_sandbox_dirs_gone(dirs)


def test_check_env_passes() -> None:
    env = gym.make("ClawGym/Custom-v0", suite=SUITE, task="hello-file")
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


def test_full_episode_through_the_gym_api(tmp_path: Path, sandbox_dirs: list[str]) -> None:
    env = gym.make("ClawGym/Custom-v0", suite=SUITE, capture_dir=tmp_path, render_mode="ansi")
    obs, info = env.reset(seed=1, options={"task": "hello-file"})
    assert info["task_id"] == "h6-smoke/hello-file" and info["status"] == "running" and info["call_index"] == 0
    messages = json.loads(obs["messages"])
    assert messages[0]["role"] == "system" and "hello.txt" in messages[-1]["content"]
    assert {t["function"]["name"] for t in json.loads(obs["tools"])} == {"bash", "read", "write", "edit"}
    assert info["request"]["messages"] == messages
    assert "hello.txt" in env.render()

    obs, reward, terminated, truncated, info = env.step(WRITE_HELLO)
    assert (reward, terminated, truncated, info["call_index"]) == (0.0, False, False, 1)
    assert json.loads(obs["messages"])[-1]["role"] == "tool"  # the harness really ran the write
    obs, reward, terminated, truncated, info = env.step("All done.")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["status"] == "completed" and info["subscores"] == {"code/file_exists": 1.0, "code/content_exact": 1.0}
    assert [c.call_index for c in info["capture"]] == [0, 1]
    assert info["capture"][1].response["content"] == "All done."
    assert Path(info["capture_path"]).read_text().count("\n") == 2
    assert obs == {"messages": "[]", "tools": "[]"}
    with pytest.raises(ConfigError, match="reset"):
        env.step("again")
    env.close()
    env.close()  # idempotent
    assert_nothing_left(env, sandbox_dirs)


def test_call_budget_truncates(sandbox_dirs: list[str]) -> None:
    with gym.make("ClawGym/Custom-v0", suite=SUITE, task="hello-file") as env:
        env.reset(seed=0)
        steps, truncated, terminated = 0, False, False
        while not (terminated or truncated):
            _, _, terminated, truncated, info = env.step({"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]})
            steps += 1
        assert truncated and not terminated and info["status"] == "truncated"
        assert steps == 8  # the task allows 8 model calls: the 8th answer leads to a refused 9th call
    assert_nothing_left(env, sandbox_dirs)


def test_close_mid_episode_and_reset_while_running_leave_nothing(sandbox_dirs: list[str]) -> None:
    env = gym.make("ClawGym/Custom-v0", suite=SUITE, task="hello-file")
    env.reset(seed=0)
    env.step({"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 300 &"}}]})
    env.reset(seed=0)  # aborts the running episode first
    assert len(sandbox_dirs) == 2 and not os.path.exists(sandbox_dirs[0])
    env.close()
    assert_nothing_left(env, sandbox_dirs)


def test_token_level_observations_and_actions(tiny_tokenizer_dir: Path, sandbox_dirs: list[str]) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    with gym.make("ClawGym/Custom-v0", suite=SUITE, task="hello-file", tokenizer=tok) as env:
        obs, info = env.reset(seed=0)
        assert len(obs["prompt_ids"]) > 50 and obs in env.observation_space
        call = '<tool_call>\n{"name": "write", "arguments": {"path": "hello.txt", "content": "hello world"}}\n</tool_call>'
        ids = tok.encode(call, add_special_tokens=False) + [tok.eos_token_id]
        logprobs = [-0.5] * len(ids)
        obs2, *_ = env.step({"completion_ids": ids, "logprobs": logprobs})
        assert tuple(obs2["prompt_ids"][: len(obs["prompt_ids"])]) == obs["prompt_ids"]  # exact prefix reuse
        _, reward, terminated, _, info = env.step("Finished.")
        assert terminated and reward == 1.0
        first, second = info["capture"]
        assert first.prompt_ids == list(obs["prompt_ids"])
        assert first.completion_ids == ids and first.logprobs == logprobs and first.token_source == "sampled"
        assert second.token_source == "tokenized" and second.completion_ids[-1] == tok.eos_token_id
        assert info["splice_hit_rate"] > 0
    with pytest.raises(ConfigError, match="needs a tokenizer"):
        with gym.make("ClawGym/Custom-v0", suite=SUITE, task="hello-file") as env:
            env.reset(seed=0)
            env.step({"completion_ids": [1, 2]})


def test_bad_kwargs_are_refused() -> None:
    with pytest.raises(ConfigError, match="pinned to 0.1.0"):
        gym.make("ClawGym/Custom-v0", suite=SUITE, harness_version="9.9")
    with pytest.raises(ConfigError, match="render_mode"), pytest.warns(UserWarning, match="render_mode"):
        gym.make("ClawGym/Custom-v0", suite=SUITE, render_mode="human")
