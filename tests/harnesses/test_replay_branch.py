"""Branching a real Claude Code episode at call k: replay reproduces calls 0..k-1, then the policy takes over.

A recorded episode (real Claude Code in bwrap, token-level scripted policy with the tiny
model's tokenizer) is replayed in a fresh sandbox and harness: requests and captured ids match
call for call, a tool output made to differ is caught as a divergence, and the merged forest
has its branch point at call k.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest

from clawgym_env.episode import run_episode
from clawgym_env.proxy import ProxyServer, ScriptedBackend
from clawgym_env.proxy.backends.replay import ReplayBackend, normalise_request
from clawgym_env.task import load_suite
from clawgym_env.tree import build_forest

pytestmark = [pytest.mark.harness, pytest.mark.sandbox]


@pytest.fixture(scope="module")
def tiny_tokenizer():
    from transformers import AutoTokenizer

    from clawgym_env.models.testing import tiny_model_path

    return AutoTokenizer.from_pretrained(tiny_model_path())


def _writes(names: list[str], done: str = "Done.") -> list:
    return [{"tool_calls": [{"name": "Write", "arguments": {"file_path": f"/workspace/{n}", "content": f"{n}\n"}}]} for n in names] + [done]


def _run(spec, backend, tmp: Path, harness: str = "claude-code"):
    async def go():
        async with ProxyServer(uds_path=tmp / "proxy.sock") as proxy:
            return await run_episode(spec, harness, backend, proxy=proxy, capture_dir=tmp)

    return asyncio.run(go())


@pytest.fixture(scope="module")
def recorded(smoke_suite: Path, tiny_tokenizer, tmp_path_factory):
    spec = load_suite(smoke_suite).get("many-files")
    tmp = tmp_path_factory.mktemp("rec")
    r = _run(spec, ScriptedBackend(_writes(["a.txt", "b.txt", "c.txt", "d.txt"]), tokenizer=tiny_tokenizer), tmp)
    assert r.status == "completed", (r.error, r.harness_output_tail[-1500:])
    assert len(r.calls) == 5 and all(c.prompt_ids and c.completion_ids for c in r.calls)
    return spec, r


def test_replay_reproduces_the_episode_call_for_call(recorded, tiny_tokenizer, tmp_path, claude_code_installed) -> None:
    spec, original = recorded
    k = 3
    policy = ScriptedBackend(_writes(["other.txt"], "Finished."), tokenizer=tiny_tokenizer)
    replay = ReplayBackend(original.calls, k, policy)
    branch = _run(spec, replay, tmp_path)
    assert branch.status == "completed", (branch.error, branch.harness_output_tail[-1500:])
    rep = replay.report
    assert rep.reached_branch and rep.replayed == k and rep.prompt_ids_equal == k and rep.divergence is None
    for a, b in zip(original.calls[:k], branch.calls[:k], strict=True):
        assert normalise_request(a.messages, a.tools) == normalise_request(b.messages, b.tools)
        assert a.prompt_ids == b.prompt_ids and a.completion_ids == b.completion_ids and a.logprobs == b.logprobs
        assert b.meta.get("replayed_from") == original.session_id
    # call k: the same request as recorded (same prefix), answered by the policy instead
    assert branch.calls[k].prompt_ids == original.calls[k].prompt_ids
    assert branch.calls[k].completion_ids != original.calls[k].completion_ids
    assert branch.calls[k].meta.get("branch_at") == k
    # the forest: replayed calls add no tokens; the branch splits off inside call k's completion
    one = build_forest([original.calls])
    both = build_forest([original.calls, branch.calls])
    p_k, c_k = len(original.calls[k].prompt_ids), len(original.calls[k].completion_ids)
    new = {n.depth + len(n.tokens) for n in both.branch_points()} - {n.depth + len(n.tokens) for n in one.branch_points()}
    assert new and p_k <= min(new) < p_k + c_k, (sorted(new), p_k, c_k)  # the first new split is inside call k
    extra = both.num_tokens - one.num_tokens
    tail = sum(len(c.completion_ids) for c in branch.calls[k:]) + sum(
        len(c.prompt_ids) - len(branch.calls[k].prompt_ids) for c in branch.calls[k + 1 :]
    )
    assert 0 < extra <= tail  # only what the branch generated after call k (shared prefixes count once)


def test_a_tool_output_that_differs_is_a_divergence(recorded, tiny_tokenizer, tmp_path, claude_code_installed) -> None:
    spec, original = recorded
    edited = [copy.deepcopy(c) for c in original.calls]
    tool_msg = next(j for j, m in enumerate(edited[2].messages) if m["role"] == "tool")
    edited[2].messages[tool_msg]["content"] = "Error: permission denied"  # what the harness saw is not this
    for policy_mode, status in (("continue", "completed"), ("stop", None)):
        replay = ReplayBackend(edited, 4, ScriptedBackend(_writes(["x.txt"]), tokenizer=tiny_tokenizer), on_divergence=policy_mode)
        r = _run(spec, replay, tmp_path / policy_mode)
        div = replay.report.divergence
        assert div is not None and div.call_index == 2 and div.message_index == tool_msg
        assert not replay.report.reached_branch and replay.report.replayed == 2
        if status:
            assert r.status == status and replay.report.handed_over_at == 2
        else:
            assert r.calls[2].error and "replay diverged at call 2" in r.calls[2].error


def test_branch_at_outside_the_recording_is_refused(recorded, tiny_tokenizer) -> None:
    _, original = recorded
    from clawgym_env.errors import ConfigError

    with pytest.raises(ConfigError, match="outside 0..5"):
        ReplayBackend(original.calls, 9, ScriptedBackend(["x"], tokenizer=tiny_tokenizer))


def test_gym_reset_with_replay_starts_at_the_branch_point(smoke_suite: Path, tmp_path: Path, claude_code_installed) -> None:
    """``env.reset(options={"replay": capture, "branch_at": k})``: the first observation is call k."""
    import json

    import gymnasium as gym

    import clawgym_env  # noqa: F401 - registers the ids

    from .gym_policy import hello_policy

    with gym.make("ClawGym/ClaudeCode-v0", suite=str(smoke_suite), task="hello-file", capture_dir=tmp_path) as env:
        obs, info = env.reset(seed=0)
        observations = [obs]
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(hello_policy(obs))
            observations.append(obs)
            done = terminated or truncated
        assert reward == 1.0
        recorded = info["capture"]
        obs, info = env.reset(options={"replay": info["capture_path"], "branch_at": 1})
        rep = info["replay"]
        assert rep.replayed == 1 and rep.handed_over_at == 1 and rep.divergence is None
        assert normalise_request(json.loads(obs["messages"]), json.loads(obs["tools"])) == normalise_request(
            recorded[1].messages, recorded[1].tools
        )
        obs, reward, terminated, truncated, info = env.step("I wrote hello.txt; nothing else to do.")
        assert terminated and reward == 1.0  # the replayed call 0 wrote the file
        assert info["capture"][0].meta.get("replayed_from") == recorded[0].session_id


@pytest.mark.slow
def test_openclaw_replays_send_the_recorded_prompt_ids(smoke_suite: Path, tiny_tokenizer, tmp_path: Path, openclaw_installed) -> None:
    """OpenClaw prints the date, a minute-stamped user turn and a random session UUID; pinned (the
    default), a replay sends the recorded bytes, so its replayed calls merge into the recorded tree."""
    spec = load_suite(smoke_suite).get("many-files")
    writes = [{"tool_calls": [{"name": "write", "arguments": {"path": n, "content": f"{n}\n"}}]} for n in ("a.txt", "b.txt")]
    original = _run(spec, ScriptedBackend([*writes, "Done."], tokenizer=tiny_tokenizer), tmp_path / "rec", "openclaw")
    assert original.status == "completed" and len(original.calls) == 3, (original.error, original.harness_output_tail[-800:])
    assert "2026-01-01" in str(original.calls[0].messages) and "2026-01-01" in tiny_tokenizer.decode(original.calls[0].prompt_ids)
    replay = ReplayBackend(original.calls, 2, ScriptedBackend(["Finished."], tokenizer=tiny_tokenizer))
    branch = _run(spec, replay, tmp_path / "branch", "openclaw")
    assert branch.status == "completed" and replay.report.reached_branch
    assert replay.report.prompt_ids_equal == 2  # every replayed call, byte for byte
    assert branch.calls[2].prompt_ids == original.calls[2].prompt_ids
