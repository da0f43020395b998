"""The tiny MoE loads like any HF MoE, shares the tiny model's tokenizer, routes top-2 of 4 and is cached."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from clawgym_env.models import tiny_model_path, tiny_moe_model_path
from clawgym_env.models.tiny_moe import build_tiny_moe_model


def test_loads_as_a_qwen3_moe_with_the_tiny_tokenizer() -> None:
    path = tiny_moe_model_path()
    model = AutoModelForCausalLM.from_pretrained(path)
    cfg = model.config
    assert cfg.model_type == "qwen3_moe" and (cfg.num_experts, cfg.num_experts_per_tok) == (4, 2) and cfg.norm_topk_prob
    assert cfg.router_aux_loss_coef == 0.001 and hasattr(cfg, "output_router_logits")
    tok = AutoTokenizer.from_pretrained(path)
    assert tok.get_vocab() == AutoTokenizer.from_pretrained(tiny_model_path()).get_vocab()
    ids = torch.tensor([tok.encode("hello world, list the files")])
    out = model(input_ids=ids, output_router_logits=True)
    assert out.logits.shape[-1] == len(tok) and torch.isfinite(out.logits).all()
    assert len(out.router_logits) == cfg.num_hidden_layers  # one router per decoder layer
    assert all(r.shape == (ids.shape[1], 4) for r in out.router_logits)
    assert float(out.aux_loss.detach()) > 0


def test_cached_by_recipe(tmp_path: Path) -> None:
    a = build_tiny_moe_model(tmp_path, experts=3, top_k=1, hidden=32, expert_hidden=16)
    assert build_tiny_moe_model(tmp_path, experts=3, top_k=1, hidden=32, expert_hidden=16) == a
    b = build_tiny_moe_model(tmp_path, experts=3, top_k=2, hidden=32, expert_hidden=16)
    assert b != a and AutoModelForCausalLM.from_pretrained(b).config.num_experts_per_tok == 2
