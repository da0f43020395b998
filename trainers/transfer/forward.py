"""Policy and reference share the frozen bottom of the model: its outputs are computed once a step, its trunk once a run.

Why: the adapter sits on the top layers only (``SFTPlan.frozen_layers``: the bottom 20 of SmolLM2's 30 carry
no LoRA), and the reference is the same base with the starting adapter merged in, so below the adapter the
policy and the reference are the same network. A GRPO step forwarded each pack through all 30 layers twice
(policy, then reference for the KL term); here the bottom runs once per pack, the harness's shared system
prompt (the trunk) through the bottom once per run (those layers never change), and each model runs only the
top layers (``FrozenBottomForward``, whose trunk keys/values each model keeps per weight version,
``DetachedTrunkForward``). The logprobs equal ``DetachedTrunkForward``'s (tested).
"""

from __future__ import annotations

from typing import Any, cast

import torch
from transformers import DynamicCache

from clawgym_env.tree import PackedTree
from trainers.tree_sft.forward import DetachedTrunkForward, TrunkCache, rows_mask, trunk_start
from trainers.tree_sft.frozen import FrozenBottomForward

__all__ = ["SharedBottom", "SharedBottomForward", "adapted_from"]


def adapted_from(model: Any) -> int:
    """The lowest decoder layer holding a trainable parameter (0 when the embeddings or layer 0 train)."""
    blocks = model.get_decoder().layers
    if any(p.requires_grad for p in model.get_input_embeddings().parameters()):
        return 0
    for i, block in enumerate(blocks):
        if any(p.requires_grad for p in block.parameters()):
            return i
    return len(blocks)


class SharedBottom:
    """Hidden states entering layer ``n`` of packs, under the bottom ``n`` layers of one frozen base; the trunk's
    part (and its keys/values there) computed once and kept, a pack's branches once per pack (``kept``)."""

    def __init__(self, model: Any, n: int, min_prefix: int = 256) -> None:
        self.model, self.n, self.min_prefix = model, n, min_prefix
        self.decoder = model.get_decoder()
        self.trunks: list[tuple[torch.Tensor, torch.Tensor, Any]] = []  # (ids, hidden, bottom cache), a few harnesses
        self.kept: dict[Any, torch.Tensor] = {}

    def _layers(self, hidden: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor | None, cache: Any) -> torch.Tensor:
        emb = self.decoder.rotary_emb(hidden, position_ids=pos)
        for layer in self.decoder.layers[: self.n]:
            hidden = layer(hidden, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True, position_embeddings=emb)
        return hidden

    def _trunk(self, ids: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, Any]:
        for t_ids, hidden, cache in self.trunks:
            if t_ids.shape == ids.shape and torch.equal(t_ids, ids):
                return hidden, cache
        cache = DynamicCache(config=self.model.config)
        hidden = self._layers(self.decoder.embed_tokens(ids), pos, None, cache)
        self.trunks = [*self.trunks[-3:], (ids, hidden, cache)]
        return hidden, cache

    def hidden(self, key: Any, pack: PackedTree) -> torch.Tensor:
        """``[1, N, H]``: ``pack``'s hidden states entering layer ``n`` (no gradient), kept under ``key``."""
        if key not in self.kept:
            device = self.decoder.embed_tokens.weight.device
            ids, pos = pack.input_ids[None].to(device), pack.position_ids[None].to(device)
            start = trunk_start(pack, self.min_prefix)
            with torch.no_grad():
                parts, cache = [], DynamicCache(config=self.model.config)
                if start:
                    trunk_h, cache = self._trunk(ids[:, :start], pos[:, :start])
                    parts.append(trunk_h)
                mask = rows_mask(pack.subtree_end.to(device), start, "bool", self.decoder.embed_tokens.weight.dtype)
                parts.append(self._layers(self.decoder.embed_tokens(ids[:, start:]), pos[:, start:], mask, cache))
                if start:  # the branches' keys/values were appended to the kept trunk: cut them off again
                    for layer in cache.layers[: self.n]:
                        kv = cast(Any, layer)  # a DynamicCache of full-attention layers (transformers types it a union)
                        kv.keys, kv.values = kv.keys[..., :start, :], kv.values[..., :start, :]
            self.kept[key] = torch.cat(parts, dim=1)
        return self.kept[key]


class _Top(FrozenBottomForward):
    """``FrozenBottomForward`` of one model whose bottom outputs come from the shared ``SharedBottom``."""

    def __init__(self, model: Any, shared: SharedBottom, chunk_size: int) -> None:
        super().__init__(model, shared.n, min_prefix=shared.min_prefix, chunk_size=chunk_size)
        self.shared = shared

    def bottom(self, key: Any, pack: PackedTree) -> torch.Tensor:
        return self.shared.hidden(key, pack)


class SharedBottomForward(DetachedTrunkForward):
    """Mixin for a ``TreeTrainerBase`` subclass with a reference model: policy and reference run only the layers above
    the policy's lowest trainable one, over bottom outputs they share; without a reference (or with a reference whose
    bottom differs from the policy's) it is ``DetachedTrunkForward``."""

    ref_model: Any
    policy: Any

    def setup_models(self) -> None:
        super().setup_models()
        self.shared_bottom: SharedBottom | None = None
        self._tops: dict[int, _Top] = {}
        if self.ref_model is None:
            return
        from peft import PeftModel

        n = adapted_from(self.policy)
        base: Any = self.policy.get_base_model() if isinstance(self.policy, PeftModel) else self.policy
        same = n > 0 and all(
            torch.equal(a, b)
            for a, b in zip(
                base.get_decoder().layers[:n].state_dict().values(),
                self.ref_model.get_decoder().layers[:n].state_dict().values(),
                strict=True,
            )
        )
        if same:
            self.shared_bottom = SharedBottom(self.ref_model, n)

    def train_step(self, batch: Any) -> dict[str, float]:
        try:
            return super().train_step(batch)  # type: ignore[misc]
        finally:
            if self.shared_bottom is not None:
                self.shared_bottom.kept.clear()  # the step's packs are gone; the trunk stays

    def forward_logprobs(self, model: Any, pack: PackedTree) -> torch.Tensor:
        if self.shared_bottom is None:
            return super().forward_logprobs(model, pack)
        inner = self.accelerator.unwrap_model(model)
        top = self._tops.setdefault(id(inner), _Top(inner, self.shared_bottom, self.config.logprob_chunk_size))
        return top.logprobs(id(pack), pack, self.trunks.setdefault(id(inner), TrunkCache()), self.config.temperature)
