"""Long episodes through the real, unmodified harnesses (bwrap): Claude Code starts a subagent, has a call failed
by the proxy and resends it, compacts and forks; OpenClaw compacts; Claude Code's agent calls the proxy itself
(with the key it scrapes from Claude Code's memory: the environment no longer holds it).
Every call's class is checked against what the scripted policy answered (tests/golden/long_episodes.py), the
episode's reward reaches every chain, and the packed loss equals the per-call loss."""

from __future__ import annotations

from typing import Any

import pytest

from clawgym_env._sync import run_sync
from clawgym_env.tree import CallRef, TreeFilters, build_tree, classify_episode, pack_tree
from clawgym_env.tree.transform import compact_vocab, shrink_spans
from tests.clawgym_env.tree.conftest import tiny_qwen3
from tests.golden.long_episodes import packed_vs_per_call, run

pytestmark = [pytest.mark.harness, pytest.mark.sandbox]


def episode(name: str) -> tuple[Any, dict[int, str]]:
    result, expected = run_sync(run(name))
    assert result.status == "completed", (result.error, result.harness_output_tail[-2000:])
    assert sorted(expected) == [c.call_index for c in result.calls]  # the policy saw every call but the failed one
    return result, expected


def sampled(calls: list[Any]) -> list[Any]:
    return [c.model_copy(update={"token_source": "sampled"}) for c in calls]


def check_training(result: Any, kinds: set[str]) -> None:
    """The reward reaches every chain, each completion trains once, the packed loss is the per-call loss."""
    calls = sampled(result.calls)
    tree = build_tree(calls)
    assert {i.kind for i in tree.calls.values() if i.trainable} == kinds
    pk = pack_tree(tree)
    pk.set_advantages({result.session_id: result.score - 0.5})
    for ref, idx in pk.call_tokens.items():
        if tree.calls[ref].trainable:
            assert bool(pk.loss_mask[idx].all()) and bool((pk.advantages[idx] == result.score - 0.5).all())
    assert pk.num_loss_tokens == sum(len(c.completion_ids or ()) for c in calls if tree.calls.get(CallRef(c.session_id, c.call_index)))
    small, vocab = compact_vocab(shrink_spans(calls, 32))
    loss_gap, grad_gap = packed_vs_per_call([small], {result.session_id: 1.0}, tiny_qwen3(vocab=vocab))
    assert loss_gap < 1e-5 and grad_gap < 1e-4, (loss_gap, grad_gap)


def test_claude_code_subagent_retry_compaction_and_fork(claude_code_installed: None) -> None:
    result, expected = episode("claude-code-long")
    got = classify_episode(result.calls)
    assert {i: c.kind for i, c in got.items()} == expected
    assert {"subagent", "compaction", "retry"} <= set(expected.values())
    assert any(c.status == 500 for c in result.calls)  # the failed call, resent by Claude Code
    check_training(result, {"main", "subagent", "compaction", "retry"})


def test_claude_code_agent_calls_to_the_proxy_are_foreign(claude_code_installed: None) -> None:
    result, expected = episode("claude-code-foreign")
    got = classify_episode(result.calls)
    assert {i: c.kind for i, c in got.items()} == expected
    foreign = [i for i, k in expected.items() if k == "foreign"]
    assert len(foreign) == 2 and all("sent by another HTTP client" in got[i].evidence for i in foreign)
    # $ANTHROPIC_API_KEY is empty in the tool's environment (refused); the key it found in Claude Code's memory works
    assert "missing API key" in str(result.calls[-1].messages[-3:])
    tree = build_tree(sampled(result.calls))
    assert tree.foreign_counts() == {result.session_id: 2}
    assert all(CallRef(result.session_id, i) not in tree.calls for i in foreign)  # never trained
    assert {i.kind for i in tree.calls.values() if i.trainable} == {"main", "subagent"}  # the real subagent trains
    shown = build_tree(sampled(result.calls), filters=TreeFilters(keep_foreign=True))
    assert sum(i.kind == "foreign" for i in shown.calls.values()) == 2


@pytest.mark.slow
def test_openclaw_compaction(openclaw_installed: None) -> None:
    """~1-2 min on a loaded box: OpenClaw's ~19k-token prompt, 10 calls."""
    result, expected = episode("openclaw-compaction")
    got = classify_episode(result.calls)
    assert {i: c.kind for i, c in got.items()} == expected and "compaction" in expected.values()
    check_training(result, {"main", "compaction"})
