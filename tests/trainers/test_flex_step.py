"""A tree GRPO step with ``attn_implementation="tree_flex"`` (FlexAttention over the pack's BlockMask, compiled)
equals the same step with ``tree_sdpa``: loss, gradient norm and updated weights, dense and mixture-of-experts.

The batch is real (custom harness in bwrap); the per-call equality of the loss and gradients on real Claude Code
and OpenClaw trees is ``tests/clawgym_env/tree/test_tree_flex.py``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainers.conftest import make_config
from trainers.tree_grpo.trainer import TreeGRPOTrainer

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("arch", ["dense", "moe"])
def test_tree_flex_step_equals_tree_sdpa_step(real_batch: Any, tmp_path: Path, arch: str) -> None:
    from clawgym_env.models import tiny_model_path, tiny_moe_model_path

    path = tiny_moe_model_path() if arch == "moe" else tiny_model_path()
    runs = {}
    for attn in ("tree_sdpa", "tree_flex"):
        # adam_epsilon 1e-4, not 1e-8: Adam's first update is lr * g / (|g| + eps), so at 1e-8 a gradient entry of 1e-9
        # whose sign float noise flips moves its weight by 2 * lr; the two attentions' gradients differ by ~1e-7
        cfg = make_config(tmp_path / attn, model_init_kwargs={"attn_implementation": attn}, beta=0.04, adam_epsilon=1e-4)
        trainer = TreeGRPOTrainer(cfg, path)
        assert trainer.policy.config._attn_implementation == attn and trainer.mask_kind == ("block" if attn == "tree_flex" else "tree")
        metrics = trainer.train_step(copy.deepcopy(real_batch))
        runs[attn] = (metrics, {n: p.detach().clone() for n, p in trainer.policy.named_parameters()})
        trainer.close()
    (ms, ps), (mf, pf) = runs["tree_sdpa"], runs["tree_flex"]
    assert mf["trainable_tokens"] == ms["trainable_tokens"] > 0
    for key in ("loss", "kl", "mismatch"):
        assert mf[key] == pytest.approx(ms[key], abs=1e-6)
    assert mf["grad_norm"] == pytest.approx(ms["grad_norm"], rel=1e-5) and ms["grad_norm"] > 0
    for name, p in ps.items():
        assert torch.allclose(pf[name], p, atol=1e-5, rtol=0), name
    assert any("experts" in n for n in ps) == (arch == "moe")
