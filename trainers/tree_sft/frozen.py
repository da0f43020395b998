"""The frozen bottom of the model runs once per pack, not once per visit.

Why: with ``frozen_layers=N`` the embeddings and the bottom N decoder layers never change while
training, so the hidden states a pack has at layer N are the same at every epoch. The first visit of a
pack computes them (trunk without gradient into a KV cache, then the branches under the tree mask,
as ``tree_sft.forward.tree_logprobs`` does) and keeps them; every visit runs only the trainable top
layers from there. With SmolLM2's 20 of 30 layers frozen, a visit's forward is a third of the model's.
The values equal ``tree_logprobs`` (tested). Decoders of the Llama / Qwen shape only: ``embed_tokens``,
``layers``, ``rotary_emb``, ``norm``.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

from clawgym_env.errors import ConfigError
from clawgym_env.tree import PackedTree
from trainers.tree_sft.forward import TrunkCache, loss_token_logprobs, rows_mask, trunk_start

__all__ = ["FrozenBottomForward", "freeze_bottom"]


def freeze_bottom(model: Any, layers: int) -> None:
    """No gradient for the embeddings (and a tied head) and the bottom ``layers`` decoder layers: autograd
    then never goes below the lowest trainable layer, so a step costs a forward plus the top layers' backward.
    An optimizer built over every parameter skips the frozen ones (their grad stays None)."""
    if not layers:
        return
    blocks = model.get_decoder().layers
    if layers >= len(blocks):
        raise ConfigError(f"frozen_layers={layers}: the model has {len(blocks)} decoder layers; freeze fewer")
    for module in (model.get_input_embeddings(), *blocks[:layers]):
        module.requires_grad_(False)


class FrozenBottomForward:
    """``logprobs(key, pack, trunk)`` for a model whose bottom ``layers`` decoder layers are frozen.

    ``key`` names the pack (the same key must always mean the same pack); its layer-``layers`` hidden
    states are kept in memory (N x hidden floats a pack).
    """

    def __init__(self, model: Any, layers: int, *, min_prefix: int = 256, chunk_size: int = 1024) -> None:
        self.model, self.n = model, layers
        self.decoder = model.get_decoder()
        self.min_prefix, self.chunk_size = min_prefix, chunk_size
        self.kept: dict[Any, torch.Tensor] = {}

    def _layers(self, layers: Any, hidden: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor | None, cache: Any) -> torch.Tensor:
        emb = self.decoder.rotary_emb(hidden, position_ids=pos)
        for layer in layers:
            hidden = layer(hidden, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True, position_embeddings=emb)
        return hidden

    def _chain(self, layers: Any, hidden: torch.Tensor, pos: torch.Tensor, lo: int, hi: int, cache: Any) -> Any:
        """Trunk rows ``lo..hi`` (a causal chain) through ``layers`` into ``cache`` (a new one when None)."""
        cache = DynamicCache(config=self.model.config) if cache is None else cache
        mask = None if lo == 0 else torch.ones(hi - lo, hi, dtype=torch.bool, device=hidden.device).tril(lo)[None, None]
        self._layers(layers, hidden[:, lo:hi], pos[:, lo:hi], mask, cache)
        return cache

    def bottom(self, key: Any, pack: PackedTree) -> torch.Tensor:
        """``[1, N, H]``: the pack's hidden states entering the first trainable layer (computed once)."""
        if key not in self.kept:
            device = self.decoder.embed_tokens.weight.device
            ids, pos = pack.input_ids[None].to(device), pack.position_ids[None].to(device)
            start, low = trunk_start(pack, self.min_prefix), self.decoder.layers[: self.n]
            with torch.no_grad():
                h, cache = self.decoder.embed_tokens(ids), DynamicCache(config=self.model.config)
                parts = [self._layers(low, h[:, :start], pos[:, :start], None, cache)] if start else []
                mask = rows_mask(pack.subtree_end.to(device), start, "bool", h.dtype)
                parts.append(self._layers(low, h[:, start:], pos[:, start:], mask, cache))
            self.kept[key] = torch.cat(parts, dim=1)
        return self.kept[key]

    def logprobs(self, key: Any, pack: PackedTree, trunk: TrunkCache | None = None, temperature: float = 1.0) -> torch.Tensor:
        """``[N]`` logprobs at ``temperature`` of the pack's loss tokens (0 elsewhere); gradient reaches the top layers only."""
        h = self.bottom(key, pack)
        device = h.device
        ids, pos = pack.input_ids[None].to(device), pack.position_ids[None].to(device)
        start, top = trunk_start(pack, self.min_prefix), self.decoder.layers[self.n :]
        cache = None
        if start:
            cache = (trunk or TrunkCache()).get(ids, pos, start, lambda lo, hi, kv: self._chain(top, h, pos, lo, hi, kv))
        mask = rows_mask(pack.subtree_end.to(device), start, "bool", h.dtype)
        out = self._layers(top, h[:, start:], pos[:, start:], mask, cache if cache is not None else DynamicCache(config=self.model.config))
        return loss_token_logprobs(self.decoder.norm(out)[0], pack, start, self.model.get_output_embeddings(), self.chunk_size, temperature)
