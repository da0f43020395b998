"""Trees from REAL long episodes (tests/golden/long_episodes.py): Claude Code with a subagent, a retried call, a
compaction and a fork; OpenClaw with a compaction; Claude Code with an agent's own calls to the proxy. Each call's
class is checked against what the scripted policy answered; every chain trains with the episode's advantage; the
packed loss and its gradient equal the per-call ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from clawgym_env.tree import CallRef, TreeFilters, build_tree, classify_episode, load_calls, pack_tree
from clawgym_env.tree.transform import compact_vocab, shrink_spans
from tests.golden.long_episodes import packed_vs_per_call

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
LONG = ["claude-code-long", "claude-code-long-wrong", "claude-code-foreign", "openclaw-compaction"]


def golden(name: str):
    return load_calls(GOLDEN / name / "capture.jsonl.gz"), json.loads((GOLDEN / name / "meta.json").read_text())


def as_sampled(calls):
    """The scripted backend's ids are exact but marked "tokenized"; relabel them sampled to train on them."""
    return [c.model_copy(update={"token_source": "sampled"}) for c in calls]


@pytest.mark.parametrize("name", LONG)
def test_every_call_is_classified_as_the_policy_answered_it(name: str) -> None:
    calls, meta = golden(name)
    got = classify_episode([c for c in calls if c.prompt_ids])
    assert {str(i): c.kind for i, c in got.items()} == meta["expected_kinds"]
    assert all(c.evidence for c in got.values())
    assert classify_episode([c for c in shrink_spans(calls, 32) if c.prompt_ids]) == got  # the shrink keeps the classes


def test_claude_code_long_episode_lines_of_work() -> None:
    calls, _ = golden("claude-code-long")
    got = classify_episode(calls)
    assert {c.chain for c in got.values()} == {"main", "subagent:1", "subagent:10"}
    assert got[1].parent is None and "Agent prompt of call 0" in got[1].evidence and "returns in call 3" in got[1].evidence
    assert got[3].dead and calls[3].status == 500 and got[4].parent == 3  # the failed call; its resend trains
    assert got[8].chain == "main" and "opens call 9" in got[8].evidence  # the summary joins the line it compacts
    assert got[9].parent is None and "written by call 8" in got[9].evidence
    assert got[10].parent == 9 == got[12].parent and "fork" in got[10].evidence  # the fork branches the main line
    assert {calls[i].meta.get("agent_id") for i in (1, 2)} != {None} and calls[0].meta.get("agent_id") is None


@pytest.mark.parametrize("name", ["claude-code-long", "openclaw-compaction"])
def test_every_chain_trains_once_with_the_episode_advantage(name: str) -> None:
    calls, _ = golden(name)
    tree = build_tree(as_sampled(calls))
    pk = pack_tree(tree)
    pk.set_advantages({tree.episodes[0]: 0.75})
    trained = {info.kind for info in tree.calls.values() if info.trainable}
    assert trained == ({"main", "subagent", "compaction", "retry"} if name == "claude-code-long" else {"main", "compaction"})
    for ref, idx in pk.call_tokens.items():
        info = tree.calls[ref]
        assert len(idx) == info.completion_len and (info.trainable or not info.completion_len)  # the failed call: none
        if info.trainable:  # one episode, each token sampled once: in the loss with its advantage, on every chain
            assert bool(pk.loss_mask[idx].all()) and torch.equal(pk.advantages[idx], torch.full((len(idx),), 0.75))
    # each completion is a loss token exactly once (the failed call has none)
    assert pk.num_loss_tokens == sum(len(c.completion_ids or ()) for c in calls)


def test_foreign_calls_never_train_while_the_real_subagent_does() -> None:
    calls, meta = golden("claude-code-foreign")
    foreign = [int(i) for i, k in meta["expected_kinds"].items() if k == "foreign"]
    tree = build_tree(as_sampled(calls))
    assert sorted(tree.dropped["kind:foreign"]) == sorted(str(CallRef(calls[0].session_id, i)) for i in foreign)
    assert tree.foreign_counts() == {calls[0].session_id: 2}
    assert all(CallRef(calls[0].session_id, i) not in tree.calls for i in foreign)
    sub = [info for info in tree.calls.values() if info.kind == "subagent"]
    assert len(sub) == 2 and all(i.trainable and not i.dead for i in sub)
    pk = pack_tree(tree)
    assert pk.num_loss_tokens == sum(len(c.completion_ids or ()) for c in calls if c.call_index not in foreign)
    shown = build_tree(as_sampled(calls), filters=TreeFilters(keep_foreign=True))  # views keep them, marked
    assert {shown.calls[CallRef(calls[0].session_id, i)].kind for i in foreign} == {"foreign"}


@pytest.mark.parametrize("names", [["claude-code-long", "claude-code-long-wrong", "claude-code-foreign"], ["openclaw-compaction"]])
def test_packed_loss_and_gradient_equal_per_call(names: list[str], make_tiny) -> None:
    """GRPO-style loss sum_call A_episode * sum logprob over a group of real long episodes: one packed forward of the
    tree against one forward per call (paths shrunk to 32-token prompt runs, ids renumbered for a tiny model)."""
    episodes = [shrink_spans(as_sampled(golden(n)[0]), 32) for n in names]
    flat, vocab = compact_vocab([c for ep in episodes for c in ep])
    group = [[c for c in flat if c.session_id == ep[0].session_id] for ep in episodes]
    adv = {ep[0].session_id: (-1.0) ** i * (i + 1) for i, ep in enumerate(group)}
    loss_gap, grad_gap = packed_vs_per_call(group, adv, make_tiny(vocab=vocab))
    assert loss_gap < 1e-5 and grad_gap < 1e-4, (loss_gap, grad_gap)
