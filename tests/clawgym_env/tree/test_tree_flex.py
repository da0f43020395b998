"""FlexAttention pieces on CPU: the mask_mod logic, the BlockMask, and attention through it."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import create_mask, flex_attention

from clawgym_env.tree import build_forest, pack_tree, pack_trees
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


@pytest.fixture(scope="module")
def forest():
    return build_forest(synthetic_group("openclaw", 2, SHAPE))


def test_mask_mod_equals_dense_tree_mask(forest) -> None:
    for pk in [pack_tree(forest), *pack_trees(forest, forest.max_depth + 10)]:
        n = len(pk)
        dense = create_mask(pk.mask_mod(), 1, 1, n, n, device="cpu")
        assert torch.equal(dense, pk.attention_mask("bool"))


def test_block_mask_skips_blocks_nobody_sees(forest) -> None:
    pk = pack_tree(forest)
    bm = pk.block_mask("cpu", block_size=16)
    assert bm.shape == (1, 1, len(pk), len(pk))
    dense = pk.attention_mask("bool")[0, 0]
    nb = -(-len(pk) // 16)
    padded = torch.zeros(nb * 16, nb * 16, dtype=torch.bool)
    padded[: len(pk), : len(pk)] = dense
    live = padded.reshape(nb, 16, nb, 16).any(dim=(1, 3))
    from_mask = bm.to_dense()[0, 0].bool()
    assert torch.equal(from_mask, live)  # a block is computed iff some query in it sees some key in it
    assert live.sum() < nb * (nb + 1) // 2  # sparser than causal: sibling branches are skipped


@pytest.mark.parametrize("block", [16, 128])
def test_block_mask_from_subtree_ranges_equals_create_block_mask(forest, block: int) -> None:
    """The pack's BlockMask (live and full blocks from subtree_end) is the one create_block_mask computes
    by evaluating the mask_mod at every position: same partial blocks, same full blocks, same dense mask."""
    from torch.nn.attention.flex_attention import create_block_mask

    from clawgym_env.tree.flex import tree_block_mask

    for pk in [pack_tree(forest), *pack_trees(forest, forest.max_depth + 10)]:
        n = len(pk)
        ours = tree_block_mask(pk.subtree_end, block)
        ref = create_block_mask(pk.mask_mod(), None, None, n, n, device="cpu", BLOCK_SIZE=block)
        for name in ("kv_num_blocks", "full_kv_num_blocks", "q_num_blocks", "full_q_num_blocks"):
            assert torch.equal(getattr(ours, name).long(), getattr(ref, name).long()), name
        for num, idx in (("kv_num_blocks", "kv_indices"), ("full_kv_num_blocks", "full_kv_indices")):
            for qb, k in enumerate(getattr(ref, num)[0, 0].tolist()):
                assert torch.equal(getattr(ours, idx)[0, 0, qb, :k].long(), getattr(ref, idx)[0, 0, qb, :k].long())
        assert block == 128 or int(ours.full_kv_num_blocks.sum()) > 0  # ancestors' blocks skip the mask_mod
        assert torch.equal(ours.to_dense(), ref.to_dense())


def test_flex_attention_through_block_mask_equals_sdpa_with_dense_mask(forest) -> None:
    pk = pack_tree(forest)
    n = len(pk)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 32, generator=g) for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unfused CPU path warns that it is not compiled
        out = flex_attention(q, k, v, block_mask=pk.block_mask("cpu", block_size=16))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=pk.attention_mask("bool"))
    assert torch.allclose(out, ref, atol=1e-5)


@pytest.mark.slow
def test_transformers_qwen3_with_flex_attention_and_block_mask(forest, tiny_model) -> None:
    """transformers passes a BlockMask straight to its flex_attention integration (~30 s on CPU)."""
    pk = pack_tree(forest)
    with torch.no_grad():
        eager = tiny_model(**pk.model_inputs("additive")).logits
        tiny_model.config._attn_implementation = "flex_attention"
        try:
            flex = tiny_model(**pk.model_inputs("block", device="cpu")).logits
        finally:
            tiny_model.config._attn_implementation = "eager"
    assert torch.allclose(flex, eager, atol=1e-4)


def _tree_loss_and_grads(model, packs, mask: str) -> tuple[float, dict[str, torch.Tensor]]:
    """Mean over (token, call) pairs of -logprob (a GRPO loss with unit advantages), each pack forwarded once with ``mask``."""
    model.zero_grad(set_to_none=True)
    total, pairs = 0.0, sum(len(pk.sampler_token) for pk in packs)
    for pk in packs:
        lp = pk.token_logprobs(model(**pk.model_inputs(mask)).logits)
        loss = -lp[pk.sampler_token].sum() / pairs
        loss.backward()
        total += float(loss.detach())
    return total, {n: p.grad.clone() for n, p in model.named_parameters()}


def _per_call_loss_and_grads(model, tree) -> tuple[float, dict[str, torch.Tensor]]:
    """The same loss, one forward per call (prompt + completion), causal attention."""
    from clawgym_env.tree import pack_naive

    model.zero_grad(set_to_none=True)
    naive, total = pack_naive(tree), 0.0
    pairs = sum(int(m.sum()) for m in naive.loss_masks)
    for i, row in enumerate(naive.rows):
        lp = naive.row_logprobs(i, model(input_ids=row[None]).logits)
        loss = -(lp * naive.loss_masks[i][naive.prompt_lens[i] :]).sum() / pairs
        loss.backward()
        total += float(loss.detach())
    return total, {n: p.grad.clone() for n, p in model.named_parameters()}


def _tiny(arch: str, attn: str) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    from clawgym_env.models import tiny_model_path, tiny_moe_model_path

    path = tiny_moe_model_path() if arch == "moe" else tiny_model_path()
    return AutoModelForCausalLM.from_pretrained(path, attn_implementation=attn, dtype=torch.float32).train()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["dense", "moe"])
@pytest.mark.parametrize("harness", ["claude-code", "openclaw"])
def test_compiled_tree_flex_loss_and_grads_equal_tree_sdpa_and_per_call_on_real_trees(harness: str, arch: str) -> None:
    """attn_implementation="tree_flex" (compiled flex forward, BlockMask backward on CPU) on a REAL captured
    episode, through the tiny Qwen3 and the tiny Qwen3-MoE: the loss and every parameter's gradient equal
    tree_sdpa's and the per-call layout's (fp32)."""
    from clawgym_env.tree import build_tree, load_calls, register_tree_attention, register_tree_flex
    from clawgym_env.tree.transform import compact_vocab, trim_shared_head
    from tests.clawgym_env.tree.test_tree_golden import GOLDEN, as_sampled

    calls, vocab = compact_vocab(trim_shared_head(as_sampled(load_calls(GOLDEN / harness / "capture.jsonl.gz")), keep=64))
    tree = build_tree(calls)
    packs = [pack_tree(tree)] if harness == "claude-code" else pack_trees(tree, tree.max_depth + 64)
    register_tree_attention()
    flex = _tree_loss_and_grads(_tiny(arch, register_tree_flex()), packs, "block")
    sdpa = _tree_loss_and_grads(_tiny(arch, "tree_sdpa"), packs, "tree")
    per_call = _per_call_loss_and_grads(_tiny(arch, "eager"), tree)
    assert sum(len(pk.sampler_token) for pk in packs) > 500  # every completion of 21 calls, not an empty pack
    assert any("experts" in n for n in flex[1]) == (arch == "moe")
    for other in (sdpa, per_call):
        assert flex[0] == pytest.approx(other[0], rel=1e-6, abs=1e-5)
        for name, grad in flex[1].items():
            diff = float((grad - other[1][name]).abs().max())
            assert diff <= 1e-5 * float(grad.abs().max()) + 1e-9, (name, diff)  # also within 1e-5 of the largest entry
    assert sum(float(g.abs().sum()) > 0 for g in flex[1].values()) > len(flex[1]) // 2  # gradients reach the layers
