"""Hypothesis over random call sets: the tree is lossless, trains each sampled token once, and one
packed forward (whole or split under any feasible budget) reproduces every call's logprobs."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawgym_env.capture.records import CallRecord
from clawgym_env.tree import PackedTree, TreeFilters, build_tree, pack_tree, pack_trees
from clawgym_env.tree.build import PrefixTree

VOCAB = 6  # a tiny alphabet makes paths collide, share and diverge a lot
ALL = TreeFilters(keep_foreign=True)  # random call sets: the trie keeps every call, foreign to any harness or not


@st.composite
def call_sets(draw: st.DrawFn) -> list[CallRecord]:
    """Calls of 1-3 episodes; each call's prompt continues a random prefix of an earlier path."""
    n_eps = draw(st.integers(1, 3))
    calls: list[CallRecord] = []
    paths: list[list[int]] = []
    for i in range(draw(st.integers(1, 9))):
        ep = draw(st.integers(0, n_eps - 1))
        base: list[int] = []
        if paths and draw(st.booleans()):
            src = draw(st.sampled_from(paths))
            base = src[: draw(st.integers(0, len(src)))]
        prompt = base + draw(st.lists(st.integers(0, VOCAB - 1), min_size=0 if base else 1, max_size=6))
        completion = draw(st.lists(st.integers(0, VOCAB - 1), max_size=6))
        source = draw(st.sampled_from(["sampled", "sampled", "tokenized"]))
        lps = [-draw(st.floats(0.01, 5.0)) for _ in completion]
        calls.append(
            CallRecord(
                session_id=f"e{ep}",
                call_index=i,
                dialect="openai-chat",
                prompt_ids=prompt,
                completion_ids=completion,
                logprobs=lps,
                token_source=source,
            )
        )
        paths.append(prompt + completion)
    return calls


def sampled_keys(calls: list[CallRecord]) -> set[tuple[int, ...]]:
    """A sampled token is identified by its full path from the root (context + itself)."""
    keys = set()
    for c in calls:
        if c.token_source == "sampled":
            path = c.prompt_ids + c.completion_ids
            keys |= {tuple(path[: j + 1]) for j in range(len(c.prompt_ids), len(path))}
    return keys


def tree_keys(tree: PrefixTree) -> list[tuple[int, ...]]:
    out = []
    for node in tree.nodes():
        prefix = node.path_tokens()[: node.depth]
        for off, flag in enumerate(node.sampled):
            if flag:
                out.append(tuple(prefix + node.tokens[: off + 1]))
    return out


def packed_loss_keys(pk: PackedTree) -> list[tuple[int, ...]]:
    keys: list[tuple[int, ...]] = []
    for i in range(len(pk)):
        p = int(pk.prev_index[i])
        keys.append((keys[p] if p >= 0 else ()) + (int(pk.input_ids[i]),))
    return [keys[i] for i in torch.nonzero(pk.loss_mask)[:, 0].tolist()]


@settings(max_examples=150, deadline=None)
@given(call_sets())
def test_tree_is_lossless_and_trains_each_sampled_token_once(calls: list[CallRecord]) -> None:
    tree = build_tree(calls, filters=ALL)
    for c in calls:
        assert tree.call_path((c.session_id, c.call_index)) == (c.prompt_ids, c.completion_ids)  # type: ignore[arg-type]
    keys = tree_keys(tree)
    assert len(keys) == len(set(keys)) == tree.num_trainable
    assert set(keys) == sampled_keys(calls)
    assert tree.num_tokens == len(
        {tuple((c.prompt_ids + c.completion_ids)[: j + 1]) for c in calls for j in range(len(c.prompt_ids) + len(c.completion_ids))}
    )
    whole = pack_tree(tree)
    assert len(whole) == tree.num_tokens
    assert sorted(packed_loss_keys(whole)) == sorted(keys)


@settings(max_examples=150, deadline=None)
@given(call_sets(), st.integers(0, 12))
def test_split_packs_own_every_token_once_and_hold_each_call(calls: list[CallRecord], slack: int) -> None:
    tree = build_tree(calls, filters=ALL)
    budget = tree.max_depth + slack
    packs = pack_trees(tree, budget)
    assert all(len(p) <= budget for p in packs)
    owned = [k for p in packs for k in packed_loss_keys(p)]
    assert sorted(owned) == sorted(tree_keys(tree))
    assert sum(len(p) - p.context_tokens for p in packs) == tree.num_tokens
    held = [ref for p in packs for ref in p.call_tokens]
    assert sorted(held) == sorted(tree.calls)
    for p in packs:
        for ref, idx in p.call_tokens.items():
            assert p.input_ids[idx].tolist() == tree.call_path(ref)[1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=call_sets(), slack=st.integers(0, 8), split=st.booleans())
def test_packed_forward_equals_per_call_forwards(calls: list[CallRecord], slack: int, split: bool, tiny_model, compare) -> None:
    tree = build_tree(calls, filters=ALL)
    packs = pack_trees(tree, tree.max_depth + slack) if split else [pack_tree(tree)]
    assert compare(tiny_model, tree, packs) < 1e-5
