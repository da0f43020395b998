"""Packing: one forward over the tree equals per-call forwards; splits lose and duplicate nothing."""

from __future__ import annotations

import pytest
import torch

from clawgym_env.errors import TreeError
from clawgym_env.tree import (
    PackedTree,
    build_forest,
    build_tree,
    pack_naive,
    pack_tree,
    pack_trees,
)
from clawgym_env.tree.synthetic import EpisodeShape, synthetic_episode, synthetic_group

SHAPE = EpisodeShape(
    n_calls=6,
    system_tokens=60,
    task_tokens=10,
    completion_tokens=(4, 12),
    tool_result_tokens=(4, 12),
    volatile_tokens=6,
    retry_at=1,
    subagent_at=2,
    compaction_at=4,
)


def ancestors_by_prev(pk: PackedTree) -> list[set[int]]:
    """For every token, itself plus the chain of parent tokens (the only keys it may see)."""
    out: list[set[int]] = []
    for i in range(len(pk)):
        p = int(pk.prev_index[i])
        out.append({i} | (out[p] if p >= 0 else set()))
    return out


def assert_well_formed(pk: PackedTree) -> None:
    anc = ancestors_by_prev(pk)
    mask = pk.attention_mask("bool")[0, 0]
    for q in range(len(pk)):
        assert set(torch.nonzero(mask[q])[:, 0].tolist()) == anc[q]
        assert int(pk.position_ids[q]) == len(anc[q]) - 1  # depth = number of ancestors
    additive = pk.attention_mask("additive", torch.float32)[0, 0]
    assert torch.equal(additive == 0, mask)


@pytest.mark.parametrize("style", ["claude-code", "openclaw"])
def test_mask_lets_each_token_see_exactly_its_ancestors(style: str) -> None:
    forest = build_forest(synthetic_group(style, 2, SHAPE))
    assert_well_formed(pack_tree(forest))


@pytest.mark.parametrize("style", ["claude-code", "openclaw"])
@pytest.mark.parametrize("mask", ["additive", "bool"])
def test_one_packed_forward_equals_per_call_forwards(style: str, mask: str, tiny_model, compare) -> None:
    tree = build_tree(synthetic_episode(style, shape=SHAPE))
    assert {i.kind for i in tree.calls.values()} == {"main", "retry", "subagent", "compaction"}
    tiny_model.config._attn_implementation = "eager" if mask == "additive" else "sdpa"
    try:
        assert compare(tiny_model, tree, [pack_tree(tree)], mask=mask) < 1e-5
    finally:
        tiny_model.config._attn_implementation = "eager"


def test_group_forest_and_split_packs_match_per_call(tiny_model, compare) -> None:
    forest = build_forest(synthetic_group("openclaw", 3, SHAPE))
    budget = forest.max_depth + 40
    packs = pack_trees(forest, budget)
    assert len(packs) > 1 and all(len(p) <= budget for p in packs)
    assert sum(p.num_loss_tokens for p in packs) == forest.num_trainable
    assert sum(len(p) - p.context_tokens for p in packs) == forest.num_tokens  # each token owned once
    for p in packs:
        assert_well_formed(p)
    assert compare(tiny_model, forest, packs) < 1e-5


def test_splitting_inside_a_long_node_keeps_every_token(tiny_model, compare) -> None:
    tree = build_tree(synthetic_episode("claude-code", shape=SHAPE))  # one long chain: splits cut nodes
    packs = pack_trees(tree, tree.max_depth)
    assert len(packs) >= 2
    assert sum(p.num_loss_tokens for p in packs) == tree.num_trainable
    assert compare(tiny_model, tree, packs) < 1e-5
    with pytest.raises(TreeError, match="raise pack_max_tokens"):
        pack_trees(tree, 30)


def test_pack_budget_error_names_the_longest_path_as_the_minimum() -> None:
    forest = build_forest(synthetic_group("openclaw", 3, SHAPE))
    longest = forest.max_depth
    with pytest.raises(TreeError, match=f"at least {longest}\\b"):
        pack_trees(forest, longest // 2)
    packs = pack_trees(forest, longest)  # the named minimum works
    assert sum(p.num_loss_tokens for p in packs) == forest.num_trainable and all(len(p) <= longest for p in packs)


def test_several_trees_in_one_sequence(tiny_model) -> None:
    a = build_tree(synthetic_episode("claude-code", "a", SHAPE, seed=1))
    b = build_tree(synthetic_episode("openclaw", "b", SHAPE, seed=2))
    pk = pack_tree([a, b])
    assert len(pk) == a.num_tokens + b.num_tokens
    assert pk.rollout_ids == ["0:a", "1:b"]
    assert_well_formed(pk)
    with torch.no_grad():
        both = pk.token_logprobs(tiny_model(**pk.model_inputs()).logits)
        alone = pack_tree(b)
        only_b = alone.token_logprobs(tiny_model(**alone.model_inputs()).logits)
    assert torch.allclose(both[a.num_tokens :], only_b, atol=1e-5)  # tree a does not leak into tree b


def test_loss_mask_logprobs_and_rollouts_follow_the_capture() -> None:
    group = synthetic_group("claude-code", 2, SHAPE)
    forest = build_forest(group)
    pk = pack_tree(forest)
    assert pk.num_loss_tokens == forest.num_trainable
    captured = sorted(lp for ep in group for c in ep for lp in c.logprobs)
    packed = pk.rollout_logprobs[pk.loss_mask]
    assert set(packed.tolist()) <= set(torch.tensor(captured).tolist())
    assert set(pk.rollout_index[pk.loss_mask].tolist()) == {0, 1}
    assert (pk.rollout_index[~pk.loss_mask] == -1).all()
    shared = torch.bincount(pk.sampler_token, minlength=len(pk))
    assert int(shared.max()) == 2  # the first completion token of both rollouts: one token, two samplers


def test_advantage_weighted_loss_and_gradient_equal_the_per_call_loss(tiny_model) -> None:
    """Why sampler sums: a token two rollouts share must carry both advantages for GRPO to match."""
    forest = build_forest(synthetic_group("claude-code", 2, SHAPE))
    adv = {"rollout0": 1.5, "rollout1": -0.5}
    pk = pack_tree(forest)
    pk.set_advantages(adv)
    tiny_model.zero_grad()
    lp = pk.token_logprobs(tiny_model(**pk.model_inputs()).logits)
    (-(lp * pk.advantages * pk.loss_mask).sum()).backward()
    tree_grad = tiny_model.model.layers[0].self_attn.q_proj.weight.grad.clone()
    tiny_model.zero_grad()
    naive = pack_naive(forest)
    for i, ref in enumerate(naive.refs):
        row_lp = naive.row_logprobs(i, tiny_model(input_ids=naive.rows[i][None]).logits)
        (-(row_lp * adv[ref.episode_id] * naive.loss_masks[i][naive.prompt_lens[i] :]).sum()).backward()
    naive_grad = tiny_model.model.layers[0].self_attn.q_proj.weight.grad.clone()
    tiny_model.zero_grad()
    assert naive_grad.abs().max() > 0
    assert torch.allclose(tree_grad, naive_grad, atol=1e-5, rtol=1e-4)


def test_naive_layout_counts_every_call_row() -> None:
    tree = build_tree(synthetic_episode("openclaw", shape=SHAPE))
    naive = pack_naive(tree)
    assert naive.num_tokens == tree.naive_tokens > tree.num_tokens
    ids, mask = naive.padded()
    assert ids.shape == (len(tree.calls), max(r.shape[0] for r in naive.rows))
    assert int(mask.sum()) == naive.num_tokens
    assert sum(int(m.sum()) for m in naive.loss_masks) == sum(i.completion_len for i in tree.calls.values())


def test_set_advantages_refuses_missing_rollouts() -> None:
    pk = pack_tree(build_forest(synthetic_group("openclaw", 2, SHAPE)))
    with pytest.raises(TreeError, match="rollout1"):
        pk.set_advantages({"rollout0": 1.0})
    with pytest.raises(TreeError, match="1 values for 2 rollouts"):
        pk.set_advantages([1.0])


def test_padding_to_whole_blocks_changes_no_logprob(tiny_model, compare) -> None:
    tree = build_tree(synthetic_episode("openclaw", shape=SHAPE))
    pk = pack_tree(tree)
    padded = pk.padded(128)
    assert len(padded) % 128 == 0 and len(padded) > len(pk)
    assert padded.num_loss_tokens == pk.num_loss_tokens
    assert_well_formed(padded)
    assert compare(tiny_model, tree, [padded]) < 1e-5
