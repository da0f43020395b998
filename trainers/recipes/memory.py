"""Memory per GPU of a recipe, from the model's ``config.json`` alone (the model is built on the meta device).

Estimates, not measurements: the big terms of FSDP2 training with fp32 master weights (parameters,
gradients and AdamW's two moments, each sharded), the bf16 copies gathered for compute, the
activations a pack keeps under activation checkpointing, the chunked output head; and for vLLM
the bf16 weights per tensor-parallel rank and what is left for the KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ModelShape", "model_shape", "trainer_memory", "vllm_memory"]

GIB = 2**30


@dataclass(frozen=True)
class ModelShape:
    """What the estimates read from a model's config."""

    name: str
    params: int
    layer_params: int  # the largest decoder layer (one FSDP unit)
    root_params: int  # outside the decoder layers: embeddings, output head, final norm (the root unit)
    layers: int
    hidden: int
    vocab: int
    attention_width: int  # q + k + v + attention output per token
    mlp_width: int  # MLP intermediates kept per token in one layer's recompute (MoE: the routed experts')
    kv_bytes_per_token: int  # bf16 keys and values of every layer


def model_shape(folder: Path) -> ModelShape:
    """Parameter counts and widths of the model ``folder/config.json`` describes (no weights read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    unit_names = set(model._no_split_modules or [])
    units = [m for m in model.modules() if type(m).__name__ in unit_names]
    per_layer = [sum(p.numel() for p in m.parameters()) for m in units]
    params = sum(p.numel() for p in model.parameters())
    heads, kv_heads = config.num_attention_heads, getattr(config, "num_key_value_heads", config.num_attention_heads)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    if getattr(config, "num_experts", None):
        mlp = 3 * config.moe_intermediate_size * config.num_experts_per_tok
    else:
        mlp = 3 * config.intermediate_size
    return ModelShape(
        name=type(model).__name__,
        params=params,
        layer_params=max(per_layer, default=0),
        root_params=params - sum(per_layer),
        layers=config.num_hidden_layers,
        hidden=config.hidden_size,
        vocab=config.vocab_size,
        attention_width=(2 * heads + 2 * kv_heads) * head_dim,
        mlp_width=mlp,
        kv_bytes_per_token=2 * config.num_hidden_layers * kv_heads * head_dim * 2,
    )


def trainer_memory(shape: ModelShape, *, shards: int, pack_tokens: int, chunk: int, checkpointing: bool) -> dict[str, float]:
    """GiB per trainer GPU, by term, for FSDP2 over ``shards`` processes forwarding packs of ``pack_tokens``."""
    fp32 = 4 * shape.params / shards
    act_layer = pack_tokens * (shape.attention_width + shape.mlp_width + 4 * shape.hidden) * 2  # bf16, one layer's working set
    saved = pack_tokens * shape.hidden * 2 * shape.layers if checkpointing else act_layer * shape.layers
    out: dict[str, Any] = {
        "fp32 parameters (sharded)": fp32,
        "fp32 gradients (sharded)": fp32,
        "AdamW moments (sharded)": 2 * fp32,
        "bf16 gathered: root + 2 layers": 2 * (shape.root_params + 2 * shape.layer_params),
        "activations kept": saved,
        "one layer recomputed": act_layer if checkpointing else 0,
        "output head chunk + hidden rows": chunk * shape.vocab * 4 * 3 + pack_tokens * shape.hidden * 4,
    }
    return {k: v / GIB for k, v in out.items()}


def vllm_memory(shape: ModelShape, *, tensor_parallel: int, gpu_gib: float, utilization: float, max_model_len: int) -> dict[str, float]:
    """Per vLLM GPU: bf16 weights, the KV cache left under ``utilization``, and the tokens / full contexts it holds."""
    weights = 2 * shape.params / tensor_parallel / GIB
    overhead = 2.0  # activations, CUDA graphs, the sampler (GiB)
    kv = max(0.0, gpu_gib * utilization - weights - overhead)
    tokens = kv * GIB / (shape.kv_bytes_per_token / tensor_parallel)
    return {
        "bf16 weights": weights,
        "runtime overhead": overhead,
        "KV cache": kv,
        "KV tokens": tokens,
        "full contexts": tokens / max_model_len,
    }
