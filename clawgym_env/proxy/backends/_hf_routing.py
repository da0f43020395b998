"""Routing capture for the HF backend: the experts every forward routed each of its rows to.

Forward hooks on the model's routers (``clawgym_env.models.moe``) keep the expert indices of the
last forward, one ``[rows, top_k]`` tensor per MoE layer; the batcher thread takes them right
after each forward it runs (a prefill: one row per prompt token it computed; a decode step: one
row per running call, in batch order). A prompt prefix reused from the prefix store was routed by
the forward that computed its keys and values, so the store keeps those rows with the blocks
(``PrefixCache``) and the call's routing starts with them.
"""

from __future__ import annotations

from typing import Any

from clawgym_env.models.moe import MoeRouter, moe_routers

__all__ = ["RoutingTap"]


class RoutingTap:
    """Hooks on a MoE model's routers; ``take()`` gives the last forward's experts ``[rows, layers, top_k]``."""

    def __init__(self, routers: list[MoeRouter]) -> None:
        self.routers = routers
        self.num_experts = routers[0].num_experts
        self._experts: list[Any] = [None] * len(routers)
        self._handles = [r.module.register_forward_hook(self._hook(r.layer)) for r in routers]

    @classmethod
    def attach(cls, model: Any) -> RoutingTap | None:
        """A tap on ``model``'s routers, or None for a dense model."""
        routers = moe_routers(model)
        return cls(routers) if routers else None

    def _hook(self, layer: int) -> Any:
        def keep(module: Any, inputs: Any, output: Any) -> None:
            self._experts[layer] = output[2]

        return keep

    def take(self) -> Any:
        """The experts of the forward that just ran, as a numpy int array ``[rows, layers, top_k]``."""
        import torch

        if any(e is None for e in self._experts):
            raise RuntimeError("routing tap: a MoE layer did not run in the last forward")
        rows = torch.stack(self._experts, dim=1).cpu().numpy()
        self._experts = [None] * len(self.routers)
        return rows

    def remove(self) -> None:
        """Take the hooks off the model."""
        for h in self._handles:
            h.remove()
