"""Fixtures for the tree tests: a random-init tiny Qwen3 (logprob equivalence needs no training)."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

VOCAB = 300


def tiny_qwen3(attn: str = "eager", dtype: torch.dtype = torch.float32, vocab: int = VOCAB) -> Qwen3ForCausalLM:
    """Random-init Qwen3 architecture, 2 layers, hidden 64, head_dim 32, GQA 2:1 (built in ~0.1 s)."""
    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=32_768,
        attn_implementation=attn,
    )
    return Qwen3ForCausalLM(cfg).to(dtype).eval()


@pytest.fixture(scope="session")
def make_tiny():
    return tiny_qwen3


@pytest.fixture(scope="session")
def tiny_model() -> Qwen3ForCausalLM:
    return tiny_qwen3()


def packed_vs_per_call(model, tree, packs, *, mask: str = "additive") -> float:
    """Max |packed - per-call| completion logprob over every call; also checks each call is in one pack."""
    from clawgym_env.tree import pack_naive, unpack_logprobs

    dtype = next(model.parameters()).dtype
    got = {}
    for pk in packs:
        with torch.no_grad():
            logits = model(**pk.model_inputs(mask, dtype)).logits
        part = unpack_logprobs(pk, logits)
        assert not set(part) & set(got), "a call was mapped back from two packs"
        got.update(part)
    naive = pack_naive(tree)
    assert set(got) == set(naive.refs)
    worst = 0.0
    for i, ref in enumerate(naive.refs):
        with torch.no_grad():
            expected = naive.row_logprobs(i, model(input_ids=naive.rows[i][None]).logits)
        assert got[ref].shape == expected.shape
        if expected.numel():
            worst = max(worst, float((got[ref] - expected).abs().max()))
    return worst


@pytest.fixture(scope="session")
def compare():
    return packed_vs_per_call
