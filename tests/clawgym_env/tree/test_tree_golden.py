"""Trees from REAL captured episodes (tests/golden/: Claude Code and OpenClaw, 21 calls each)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from clawgym_env.tree import CallRef, build_tree, load_calls, pack_tree, pack_trees
from clawgym_env.tree.transform import compact_vocab, trim_shared_head

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
HARNESSES = ["claude-code", "openclaw"]


def golden(harness: str):
    return load_calls(GOLDEN / harness / "capture.jsonl.gz")


def as_sampled(calls):
    """The golden backend is scripted and token-level (its ids are exact, logprobs 0.0) and the
    capture marks them "tokenized"; relabel them sampled to exercise the trainable bookkeeping."""
    return [c.model_copy(update={"token_source": "sampled"}) for c in calls]


def extends(a, b) -> bool:
    path = a.prompt_ids + a.completion_ids
    return b.prompt_ids[: len(path)] == path


@pytest.mark.parametrize("harness", HARNESSES)
def test_real_episode_rebuilds_exactly_and_shares_its_prompts(harness: str) -> None:
    calls = golden(harness)
    tree = build_tree(calls)
    assert len(calls) == len(tree.calls) == 21
    for c in calls:
        assert tree.call_path(CallRef(c.session_id, c.call_index)) == (c.prompt_ids, c.completion_ids)
    assert tree.num_trainable == 0  # "tokenized" completions are never trained on
    assert len(pack_tree(tree)) == tree.num_tokens
    n_extend = sum(extends(a, b) for a, b in itertools.pairwise(calls))
    if harness == "claude-code":
        assert n_extend == 20 and len(tree.leaves()) == 1
        assert tree.naive_tokens / tree.num_tokens > 15
    else:  # the volatile context message: no call extends the previous one, every call is a leaf
        assert n_extend == 0 and len(tree.leaves()) == 21
        assert tree.naive_tokens / tree.num_tokens > 12


@pytest.mark.parametrize("harness", HARNESSES)
def test_real_episode_trains_each_sampled_token_once(harness: str) -> None:
    calls = as_sampled(golden(harness))
    tree = build_tree(calls)
    keys = set()
    for c in calls:
        path = c.prompt_ids + c.completion_ids
        keys |= {tuple(path[: j + 1]) for j in range(len(c.prompt_ids), len(path))}
    assert tree.num_trainable == len(keys)
    packs = pack_trees(tree, tree.max_depth + 256)
    assert (len(packs) == 1) == (harness == "claude-code")  # a chain never needs more than its depth
    assert sum(p.num_loss_tokens for p in packs) == tree.num_trainable
    if harness == "claude-code":  # each completion is re-sent as prompt later: still trained once
        assert tree.num_trainable == sum(len(c.completion_ids) for c in calls)


@pytest.mark.parametrize("harness", HARNESSES)
def test_real_episode_packed_forward_equals_per_call(harness: str, make_tiny, compare) -> None:
    """Shared head cut to 64 tokens and ids renumbered 1:1 so a tiny model runs it on CPU."""
    calls, vocab = compact_vocab(trim_shared_head(as_sampled(golden(harness)), keep=64))
    tree = build_tree(calls)
    assert len(tree.leaves()) == (1 if harness == "claude-code" else 21)
    model = make_tiny(vocab=vocab)
    # a chain packs whole; OpenClaw's 21 leaves are split over several packs with re-included context
    packs = [pack_tree(tree)] if harness == "claude-code" else pack_trees(tree, tree.max_depth + 64)
    assert (len(packs) > 1) == (harness == "openclaw")
    assert compare(model, tree, packs) < 1e-5
