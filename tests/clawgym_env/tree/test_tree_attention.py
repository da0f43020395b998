"""Block-sparse tree attention (attn_implementation="tree_sdpa"): equal to SDPA under the dense
tree mask, values and gradients, alone and inside transformers' Qwen3, with no N x N tensor."""

from __future__ import annotations

import pytest
import torch

from clawgym_env.errors import TreeError
from clawgym_env.tree import TreeBlocks, build_forest, pack_tree, pack_trees, register_tree_attention, tree_attention
from clawgym_env.tree.synthetic import EpisodeShape, synthetic_group

SHAPE = EpisodeShape(
    n_calls=4,
    system_tokens=40,
    task_tokens=8,
    completion_tokens=(4, 10),
    tool_result_tokens=(4, 10),
    volatile_tokens=5,
    retry_at=1,
    subagent_at=2,
)


@pytest.fixture(scope="module", params=["openclaw", "claude-code"])
def forest(request):
    return build_forest(synthetic_group(request.param, 2, SHAPE))


@pytest.mark.parametrize("block", [32, 4096])
def test_tree_attention_equals_sdpa_with_dense_mask_values_and_grads(forest, block: int) -> None:
    pk = pack_tree(forest)
    n = len(pk)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, n, 16, generator=g, requires_grad=True)
    k, v = (torch.randn(1, 2, n, 16, generator=g, requires_grad=True) for _ in range(2))  # GQA 2:1
    out = tree_attention(q, k, v, TreeBlocks.build(pk.subtree_end, block))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=pk.attention_mask("bool"), enable_gqa=True)
    assert torch.allclose(out, ref, atol=1e-5)
    up = torch.randn(out.shape, generator=g)
    for a, b in zip(torch.autograd.grad(out, (q, k, v), up), torch.autograd.grad(ref, (q, k, v), up), strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_live_blocks_are_exactly_the_blocks_the_dense_mask_touches(forest) -> None:
    for pk in [pack_tree(forest), *pack_trees(forest, forest.max_depth + 10)]:
        n, b = len(pk), 16
        tb = TreeBlocks.build(pk.subtree_end, b)
        nb = -(-n // b)
        dense = torch.zeros(nb * b, nb * b, dtype=torch.bool)
        dense[:n, :n] = pk.attention_mask("bool")[0, 0]
        live = dense.reshape(nb, b, nb, b).any(dim=(1, 3))
        for qb, keys in enumerate(tb.keys):
            assert torch.equal(torch.unique(keys // b), live[qb].nonzero()[:, 0])
        assert tb.live_pairs < n * (n + 1) // 2 + n * b  # skips sibling branches; no more than causal plus one block
    with pytest.raises(TreeError, match="positive block"):
        TreeBlocks.build(pack_tree(forest).subtree_end, 0)


def test_qwen3_with_tree_sdpa_equals_dense_sdpa_logits_and_grads(forest, make_tiny) -> None:
    pk = pack_tree(forest)
    name = register_tree_attention()
    dense, tree = make_tiny("sdpa").train(), make_tiny("sdpa").train()
    tree.config._attn_implementation = name  # same weights (seeded), tree attention
    a = dense(**pk.model_inputs("bool")).logits
    b = tree(**pk.model_inputs("tree")).logits
    assert torch.allclose(a, b, atol=1e-5)
    a.square().mean().backward()
    b.square().mean().backward()
    for (na, pa), (_, pb) in zip(dense.named_parameters(), tree.named_parameters(), strict=True):
        assert torch.allclose(pa.grad, pb.grad, atol=1e-5, rtol=1e-4), na
    with torch.no_grad():  # no tree given: transformers' sdpa (causal), also past a KV cache
        ids = pk.input_ids[None, :40]
        plain = dense(input_ids=ids).logits
        assert torch.allclose(tree(input_ids=ids).logits, plain, atol=1e-5)
        past = tree(input_ids=ids[:, :30], use_cache=True).past_key_values
        assert torch.allclose(tree(input_ids=ids[:, 30:], past_key_values=past).logits, plain[:, 30:], atol=1e-5)
