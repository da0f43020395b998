"""Chunked logprobs from the hidden states: the loss tokens' values and gradients equal the full-logits
path, and the output head never sees more than ``chunk_size`` rows, nor any row that is not needed."""

from __future__ import annotations

import pytest
import torch

from clawgym_env.errors import ConfigError
from clawgym_env.tree import build_forest, pack_tree, register_tree_attention
from clawgym_env.tree.synthetic import EpisodeShape, synthetic_group
from tests.clawgym_env.tree.conftest import tiny_qwen3
from trainers.core.logprobs import head_logprobs, pack_logprobs

SHAPE = EpisodeShape(
    n_calls=3, system_tokens=40, task_tokens=8, completion_tokens=(4, 10), tool_result_tokens=(4, 10), volatile_tokens=5, retry_at=1
)


@pytest.fixture(scope="module")
def pack():
    return pack_tree(build_forest(synthetic_group("claude-code", 2, SHAPE)))


def test_chunked_logprobs_equal_full_logits_values_and_grads(pack) -> None:
    full_model, model = tiny_qwen3("sdpa").train(), tiny_qwen3("sdpa").train()
    model.config._attn_implementation = register_tree_attention()
    rows: list[int] = []
    model.get_output_embeddings().register_forward_hook(lambda m, inp, out: rows.append(int(inp[0].reshape(-1, inp[0].shape[-1]).shape[0])))
    full = pack_logprobs(full_model, pack, mask_kind="bool", device="cpu", dtype=torch.float32, chunk_size=0)
    lp = pack_logprobs(model, pack, mask_kind="tree", device="cpu", dtype=torch.float32, chunk_size=7)
    m = pack.loss_mask
    assert m.sum() > 7
    assert torch.allclose(lp[m], full[m], atol=1e-5) and torch.all(lp[~m] == 0)
    assert max(rows) <= 7 and sum(rows) == int(m.sum())  # only loss tokens' parents, 7 rows at a time, forward only
    weights = torch.linspace(-1, 1, len(pack))
    (full[m] * weights[m]).sum().backward()
    (lp * weights).sum().backward()
    assert sum(rows) == 2 * int(m.sum())  # backward recomputed each chunk once
    for (name, a), (_, b) in zip(full_model.named_parameters(), model.named_parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-4), name


def test_head_logprobs_rejects_bad_chunk_and_models_with_logit_postprocessing(pack) -> None:
    head = torch.nn.Linear(4, 9)
    with pytest.raises(ConfigError, match="chunk_size"):
        head_logprobs(torch.randn(3, 4), head, torch.zeros(3, dtype=torch.long), chunk_size=0)
    model = tiny_qwen3("sdpa")
    model.config.final_logit_softcapping = 30.0
    with pytest.raises(ConfigError, match="final_logit_softcapping"):
        pack_logprobs(model, pack, mask_kind="bool", device="cpu", dtype=torch.float32)


def test_trainer_defaults_to_tree_attention_and_chunked_logprobs(tiny_path, tmp_path) -> None:
    from tests.trainers.conftest import make_config
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    new = TreeGRPOTrainer(make_config(tmp_path / "new"), tiny_path)
    old = TreeGRPOTrainer(make_config(tmp_path / "old", logprob_chunk_size=0, model_init_kwargs={"attn_implementation": "sdpa"}), tiny_path)
    assert (new.mask_kind, old.mask_kind) == ("tree", "bool")
    shape = EpisodeShape(n_calls=3, system_tokens=40, task_tokens=8, vocab_size=new.model.config.vocab_size)
    vocab_pack = pack_tree(build_forest(synthetic_group("claude-code", 2, shape)))
    with torch.no_grad():
        a, b = new.forward_logprobs(new.model, vocab_pack), old.forward_logprobs(old.model, vocab_pack)
    m = vocab_pack.loss_mask
    assert torch.allclose(a[m], b[m], atol=1e-5)
