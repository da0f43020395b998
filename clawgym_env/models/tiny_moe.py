"""A tiny Qwen3-MoE (mixture-of-experts) model with the tiny model's tokenizer, for MoE tests on CPU.

Same recipe as ``tiny.py`` (a BPE tokenizer trained on the built-in corpus, our tools-capable chat
template, random weights drawn from a seed), with every decoder layer's MLP replaced by a sparse MoE
block: ``experts`` small experts, each token routed to ``top_k`` of them (top-2 of 4 by default), the
top-k gate weights renormalised to sum to 1 as in Qwen3-30B-A3B (``norm_topk_prob``). The router's
load-balancing coefficient stays the architecture's default (0.001), which TRL's
``router_aux_loss_coef=None`` picks up. Folders are cached by a hash of every input.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from clawgym_env.models.cache import atomic_dir, models_cache_dir
from clawgym_env.models.tiny import DEFAULT_MAX_POSITIONS, _recipe, _train_tokenizer, config_fields, save_model

__all__ = ["build_tiny_moe_model"]

_MOE_VERSION = 1  # bump when the MoE part of the recipe changes


def build_tiny_moe_model(
    out_dir: Path | None = None,
    *,
    seed: int = 0,
    hidden: int = 64,
    experts: int = 4,
    top_k: int = 2,
    expert_hidden: int = 64,
    max_positions: int = DEFAULT_MAX_POSITIONS,
) -> Path:
    """Build (or reuse) ``<out_dir>/tiny-moe-<hash>`` and return its path.

    ``experts`` experts per layer of ``expert_hidden`` units each, ``top_k`` routed per token; attention,
    layers and tokenizer are ``build_tiny_model``'s defaults (2 layers, 2 heads of 32, the same vocabulary).
    """
    if not 1 <= top_k <= experts:
        raise ValueError(f"top_k={top_k} must be between 1 and experts={experts}")
    recipe = _recipe(seed, 1024, hidden, 2, 2, 1, 32, max_positions)
    recipe["moe"] = {"version": _MOE_VERSION, "experts": experts, "top_k": top_k, "expert_hidden": expert_hidden}
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    target = Path(out_dir or models_cache_dir()) / f"tiny-moe-{digest}"
    return atomic_dir(target, lambda tmp: _build(tmp, recipe))


def _build(folder: Path, recipe: dict) -> None:
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    max_positions = recipe.get("max_positions", DEFAULT_MAX_POSITIONS)
    tokenizer = _train_tokenizer(recipe["vocab_size"], max_positions=max_positions)
    tokenizer.save_pretrained(folder)
    moe = recipe["moe"]
    config = Qwen3MoeConfig(
        **config_fields(recipe, tokenizer, max_positions),
        moe_intermediate_size=moe["expert_hidden"],
        num_experts=moe["experts"],
        num_experts_per_tok=moe["top_k"],
        norm_topk_prob=True,
        decoder_sparse_step=1,
    )
    torch.manual_seed(recipe["seed"])
    save_model(Qwen3MoeForCausalLM(config), folder, tokenizer)
    (folder / "clawgym_recipe.json").write_text(json.dumps(recipe, indent=1, sort_keys=True))
