"""For each real harness: a full episode in a bwrap sandbox, driven through the Gym API by a
scripted policy; the verifier scores 1.0 and the capture holds every call the harness made,
counted against the harness's own transcript."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import clawgym_env  # noqa: F401 - registers the ids
from harnesses.claude_code import ClaudeCode
from harnesses.openclaw import OpenClaw

from .gym_policy import hello_policy

pytestmark = [pytest.mark.harness, pytest.mark.sandbox]


def drive(env_id: str, suite: Path, capture_dir: Path, policy: Any = hello_policy, **make_kw: Any) -> tuple[int, dict[str, Any], float]:
    """Run one episode; return (steps, final info, reward). ``make_kw`` go to gym.make (e.g. sandbox="docker")."""
    with gym.make(env_id, suite=str(suite), task="hello-file", capture_dir=capture_dir, **make_kw) as env:
        obs, info = env.reset(seed=0)
        steps, done = 0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs))
            steps += 1
            done = terminated or truncated
            assert steps < 20, "the harness keeps calling the model"
    return steps, info, float(reward)


def test_claude_code_episode(claude_code_installed: None, smoke_suite: Path, tmp_path: Path) -> None:
    steps, info, reward = drive("ClawGym/ClaudeCode-v0", smoke_suite, tmp_path)
    assert info["status"] == "completed", (info["error"], info["harness_output_tail"][-2000:])
    assert reward == 1.0 and info["subscores"] == {"code/file_exists": 1.0, "code/content_exact": 1.0}
    calls = info["capture"]
    assert all(c.dialect == "anthropic" and c.stream and c.error is None for c in calls)
    stream_json = (tmp_path / f"{info['session_id']}.harness" / "stdout.log").read_text()
    assert ClaudeCode().count_calls(tmp_path / f"{info['session_id']}.harness") == len(calls) == steps
    result = json.loads(stream_json.strip().splitlines()[-1])
    assert result["type"] == "result" and result["subtype"] == "success"
    assert len((tmp_path / f"{info['session_id']}.jsonl").read_text().splitlines()) == len(calls)


def test_claude_code_bash_profile_offers_only_bash(claude_code_installed: None, smoke_suite: Path, tmp_path: Path) -> None:
    """``claude-code-bash`` is the same binary with ``--tools Bash``: one tool, a prompt a quarter the size."""
    seen: list[list[str]] = []

    def policy(obs: dict[str, Any]) -> Any:
        seen.append([t["function"]["name"] for t in json.loads(obs["tools"])])
        return hello_policy(obs)

    steps, info, reward = drive("ClawGym/ClaudeCodeBash-v0", smoke_suite, tmp_path, policy=policy)
    assert info["status"] == "completed", (info["error"], info["harness_output_tail"][-2000:])
    assert reward == 1.0
    offered = [set(names) for names in seen if names]
    # Claude Code 2.1 always adds a schema-less DeferredToolPlaceholder; no Write, Read, Edit, ...
    assert len(offered) == steps and all(names == {"Bash", "DeferredToolPlaceholder"} for names in offered)
    calls = info["capture"]
    assert all(c.dialect == "anthropic" and c.stream and c.error is None for c in calls)
    assert ClaudeCode().count_calls(tmp_path / f"{info['session_id']}.harness") == len(calls) == steps  # its own record agrees


def test_openclaw_episode(openclaw_installed: None, smoke_suite: Path, tmp_path: Path) -> None:
    steps, info, reward = drive("ClawGym/OpenClaw-v0", smoke_suite, tmp_path)
    assert info["status"] == "completed", (info["error"], info["harness_output_tail"][-2000:])
    assert reward == 1.0 and info["subscores"] == {"code/file_exists": 1.0, "code/content_exact": 1.0}
    calls = info["capture"]
    assert all(c.dialect == "openai-chat" and c.stream and c.error is None for c in calls)
    own = tmp_path / f"{info['session_id']}.harness"
    assert OpenClaw().count_calls(own) == len(calls) == steps
    envelope = json.loads((own / "stdout.log").read_text())
    assert envelope["status"] == "ok" and envelope["assistantTurns"] == len(calls)
    # OpenClaw appends a volatile internal-context message and rewrites tool-call ids; the capture
    # still attributes each call to this session, in order.
    assert [c.call_index for c in calls] == list(range(len(calls)))
    assert {c.session_id for c in calls} == {info["session_id"]}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("api", "dialect", "path"),
    [
        ("openai-responses", "openai-responses", "/v1/responses"),
        ("anthropic-messages", "anthropic", "/v1/messages"),
    ],
)
def test_openclaw_other_provider_apis(
    api: str, dialect: str, path: str, openclaw_installed: None, smoke_suite: Path, tmp_path: Path
) -> None:
    """~1 min each: the same episode with OpenClaw speaking the Responses or Messages API."""
    with gym.make(
        "ClawGym/OpenClaw-v0", suite=str(smoke_suite), task="hello-file", capture_dir=tmp_path, harness_options={"api": api}
    ) as env:
        obs, info = env.reset(seed=0)
        assert info["request"]["dialect"] == dialect
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(hello_policy(obs))
            done = terminated or truncated
    assert info["status"] == "completed" and reward == 1.0, info["error"]
    assert {(c.dialect, c.path.split("?")[0]) for c in info["capture"]} == {(dialect, path)}
    assert OpenClaw().count_calls(tmp_path / f"{info['session_id']}.harness") == len(info["capture"])


def test_claude_code_first_prompt_is_byte_stable(claude_code_installed: None, smoke_suite: Path) -> None:
    """Fixed HOME, workspace and model name: two episodes of a task start from the same bytes."""
    firsts = []
    with gym.make("ClawGym/ClaudeCode-v0", suite=str(smoke_suite), task="hello-file") as env:
        for seed in (0, 1):
            obs, _ = env.reset(seed=seed)
            firsts.append(obs)
            done = False
            while not done:
                obs, _, terminated, truncated, _ = env.step(hello_policy(obs))
                done = terminated or truncated
    assert firsts[0] == firsts[1]
