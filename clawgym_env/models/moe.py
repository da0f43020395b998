"""The routers of a transformers mixture-of-experts model, and the one gate rule replay uses.

Every MoE layer of the models below has a router module whose forward takes the layer's hidden
states ``[rows, hidden]`` and returns ``(logits [rows, E], gate weights [rows, k], experts [rows, k])``:
softmax over all ``E`` experts, the top ``k`` probabilities as gate weights, renormalised to sum to
1 where the model says so. The sampler records ``experts`` of each row (routing capture); the
trainer replaces them with the recorded ones and recomputes the gate weights from its own logits
(routing replay). Routers that score otherwise (sigmoid scores with a bias, grouped top-k: DeepSeek-V3
style) are refused rather than replayed with the wrong rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clawgym_env.errors import ConfigError

__all__ = ["SUPPORTED_ROUTERS", "MoeRouter", "gate_weights", "moe_routers"]

SUPPORTED_ROUTERS: dict[str, Callable[[Any], bool]] = {
    "Qwen3MoeTopKRouter": lambda m: bool(m.norm_topk_prob),
    "Qwen2MoeTopKRouter": lambda m: bool(m.norm_topk_prob),
    "OlmoeTopKRouter": lambda m: bool(m.norm_topk_prob),
}
"""Router class name -> whether its top-k gate weights are renormalised (read from the module)."""

_EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts")


@dataclass(frozen=True)
class MoeRouter:
    """One MoE layer's router: its module, its place among the MoE layers, and its routing rule."""

    module: Any
    layer: int
    """Index among the model's MoE layers (dense MLP layers are not counted)."""
    top_k: int
    num_experts: int
    renormalise: bool
    """Gate weights divided by their sum over the top-k."""


def moe_routers(model: Any) -> list[MoeRouter]:
    """The model's routers in layer order; ``[]`` for a dense model.

    Raises ConfigError for a mixture-of-experts model whose routers follow another rule.
    """
    out: list[MoeRouter] = []
    for module in model.modules():
        rule = SUPPORTED_ROUTERS.get(type(module).__name__)
        if rule is not None:
            out.append(MoeRouter(module, len(out), int(module.top_k), int(module.num_experts), rule(module)))
    if not out:
        config = getattr(model, "config", None)
        if any(getattr(config, f, 0) for f in _EXPERT_FIELDS):
            raise ConfigError(
                f"{type(model).__name__} is a mixture-of-experts model whose routers are none of "
                f"{sorted(SUPPORTED_ROUTERS)} (softmax top-k); routing capture and replay do not support it"
            )
    return out


def gate_weights(router: MoeRouter, logits: Any, experts: Any) -> Any:
    """Gate weights ``[rows, k]`` of ``experts`` under ``logits``, by the router's own rule (gradient flows to ``logits``).

    For the experts the router would pick itself this equals its own output bit for bit.
    """
    import torch

    probs = torch.softmax(logits, dim=-1, dtype=torch.float)
    weights = probs.gather(-1, experts)
    if router.renormalise:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(logits.dtype)
