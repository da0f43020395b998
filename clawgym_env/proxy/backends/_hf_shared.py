"""Decoding many calls that open with the same long prompt: that prompt's keys/values held once.

Why: every episode of one harness opens with the same system prompt and tools (Claude Code with
``--tools Bash``: 2,880 of the ~3,150 tokens of every task's first prompt, for SmolLM2). Padded into
one batch cache, every running call held its own copy of those keys/values (46 KB a token for
SmolLM2, ~130 MB a call), each decode step read every copy, and ``DynamicCache.update`` re-copied the
whole cache to append one column: attention and that copy were 70% of a decode step. Here the running
batch keeps the shared prefix (the *trunk*) once; each call (a *slot*) holds only the keys/values
after it, in a buffer written in place; and attention over trunk and slot is one softmax over both,
combined exactly through their maxima and sums (the split-softmax identity flash attention uses).

``SlotCache`` is the transformers ``Cache`` the model writes into; ``shared_attention`` is registered
as an attention implementation (``SHARED_ATTENTION``) that reads the trunk from the ``trunk`` keyword
of the forward, and is transformers' SDPA (masks and all) without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
from transformers.cache_utils import Cache, DynamicLayer

__all__ = ["SHARED_ATTENTION", "SlotCache", "Trunk", "register_shared_attention", "shared_attention"]

SHARED_ATTENTION = "clawgym_shared_sdpa"
"""The ``attn_implementation`` name the backend's model runs under."""


@dataclass
class Trunk:
    """A prompt prefix many running calls share: its ids, keys/values and (MoE) routed experts."""

    ids: list[int]
    kv: torch.Tensor
    """(layers, 2, kv_heads, T, head_dim)."""
    routing: Any = None
    """(T, MoE layers, top_k) experts of its tokens, or None for a dense model."""

    def __len__(self) -> int:
        return len(self.ids)

    def starts(self, prompt: list[int]) -> bool:
        """Whether ``prompt`` opens with the trunk and goes on past it."""
        n = len(self.ids)
        return len(prompt) > n and prompt[:n] == self.ids


class SlotLayer(DynamicLayer):
    """One layer's keys/values of every slot, ``(slots, kv_heads, width, head_dim)`` with room to grow in place."""

    def __init__(self, cache: SlotCache) -> None:
        super().__init__()
        self.cache = cache
        self.buf_k: torch.Tensor | None = None
        self.buf_v: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self.is_initialized = True

    def reserve(self, slots: int, width: int, like: torch.Tensor) -> None:
        """Room for ``slots`` slots of ``width`` tokens (grown by half again when short, its contents kept)."""
        have_s, have_w = (0, 0) if self.buf_k is None else (self.buf_k.shape[0], self.buf_k.shape[2])
        if slots <= have_s and width <= have_w:
            return
        s = max(slots, have_s)
        w = have_w if width <= have_w else max(width, have_w + have_w // 2, 64)
        k = like.new_zeros((s, like.shape[1], w, like.shape[3]))
        v = like.new_zeros((s, like.shape[1], w, like.shape[3]))
        if self.buf_k is not None:
            old_k, old_v = self.buffers()
            k[:have_s, :, :have_w] = old_k
            v[:have_s, :, :have_w] = old_v
        self.buf_k, self.buf_v = k, v

    def buffers(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The key and value buffers, once ``reserve`` has made them."""
        assert self.buf_k is not None and self.buf_v is not None, "reserve() makes the buffers first"
        return self.buf_k, self.buf_v

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        pos = self.cache.pos  # (slots,) tokens each slot held before this forward
        slots, q = key_states.shape[0], key_states.shape[2]
        end = int(pos.max()) + q
        self.reserve(slots, end, key_states)
        assert self.buf_k is not None and self.buf_v is not None
        if q == 1:
            rows = torch.arange(slots, device=pos.device)
            self.buf_k[rows, :, pos] = key_states[:, :, 0]
            self.buf_v[rows, :, pos] = value_states[:, :, 0]
        else:
            for i in range(slots):
                p = int(pos[i])
                self.buf_k[i, :, p : p + q] = key_states[i]
                self.buf_v[i, :, p : p + q] = value_states[i]
        self.keys, self.values = self.buf_k[:slots, :, :end], self.buf_v[:slots, :, :end]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return int(self.cache.pos.max()) if self.cache.pos.numel() else 0


class SlotCache(Cache):
    """The running batch's per-slot keys/values after the trunk; ``pos`` is each slot's length before a forward."""

    def __init__(self, num_layers: int, device: torch.device | str) -> None:
        self.pos = torch.zeros(0, dtype=torch.long, device=device)
        self.slot_layers = [SlotLayer(self) for _ in range(num_layers)]  # Cache.layers, typed as what they are
        super().__init__(layers=list(self.slot_layers))

    def slot(self, i: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Slot ``i``'s keys/values per layer, ``(1, kv_heads, length, head_dim)`` views."""
        n = int(self.pos[i])
        return [(k[i : i + 1, :, :n], v[i : i + 1, :, :n]) for k, v in (layer.buffers() for layer in self.slot_layers)]

    def put(self, i: int, layers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Copy one call's keys/values (``(1, kv_heads, n, head_dim)`` per layer) into slot ``i``."""
        n = layers[0][0].shape[2]
        if i >= self.pos.shape[0]:
            self.pos = torch.cat([self.pos, self.pos.new_zeros(i + 1 - self.pos.shape[0])])
        for layer, (k, v) in zip(self.slot_layers, layers, strict=True):
            layer.reserve(i + 1, n, k)
            buf_k, buf_v = layer.buffers()
            buf_k[i, :, :n] = k[0]
            buf_v[i, :, :n] = v[0]
            layer.lazy_initialization(k, v)
        self.pos[i] = n

    def shift(self, i: int, n: int) -> None:
        """Drop slot ``i``'s first ``n`` tokens (now read from the trunk): the rest moves to the front."""
        m = int(self.pos[i])
        for layer in self.slot_layers:
            for buf in layer.buffers():
                buf[i, :, : m - n] = buf[i, :, n:m].clone()
        self.pos[i] = m - n

    def width(self) -> int:
        """Tokens of room each slot has now."""
        buf = self.slot_layers[0].buf_k
        return 0 if buf is None else int(buf.shape[2])

    def keep(self, slots: list[int]) -> None:
        """Move ``slots`` to the front, in order (the others are dropped)."""
        index = torch.tensor(slots, dtype=torch.long, device=self.pos.device)
        width = int(self.pos[index].max()) if slots else 0
        for layer in self.slot_layers:
            if layer.buf_k is not None:
                k, v = layer.buffers()
                layer.buf_k, layer.buf_v = k[index, :, : max(width, 1)].clone(), v[index, :, : max(width, 1)].clone()
        self.pos = self.pos[index]


def shared_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    trunk: Trunk | None = None,
    trunk_uses: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention of ``(B, H, q, d)`` queries over the trunk (all of it, for the slots ``trunk_uses`` marks, default
    every slot) and over each slot's own ``(B, Hkv, W, d)`` keys under ``attention_mask`` ``(B, 1, q, W)`` (bool);
    output ``(B, q, H, d)``.

    The trunk's keys are read once for all slots: the slots' query heads are folded into the rows of one
    matmul per key head, so no slot repeats them.
    """
    if trunk is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    b, h, q, d = query.shape
    hk = key.shape[1]
    g = h // hk
    scale = scaling if scaling is not None else d**-0.5
    layer_idx = int(cast(int, module.layer_idx))
    tk, tv = trunk.kv[layer_idx, 0], trunk.kv[layer_idx, 1]  # (Hkv, T, d)
    qs = query.reshape(b, hk, g * q, d) * scale
    folded = qs.transpose(0, 1).reshape(hk, b * g * q, d)  # (Hkv, B*g*q, d): every slot's rows of a key head
    s_trunk = (folded @ tk.transpose(-1, -2)).view(hk, b, g * q, -1).transpose(0, 1)  # (B, Hkv, g*q, T)
    s_own = qs @ key.transpose(-1, -2)  # (B, Hkv, g*q, W)
    if attention_mask is not None:
        mask = attention_mask[:, :, None].expand(b, 1, g, q, -1).reshape(b, 1, g * q, -1)
        s_own = s_own.masked_fill(~mask, float("-inf"))
    if trunk_uses is not None and not bool(trunk_uses.all()):
        s_trunk = s_trunk.masked_fill(~trunk_uses[:, None, None, None], float("-inf"))
    top = torch.maximum(s_trunk.amax(-1, keepdim=True), s_own.amax(-1, keepdim=True))
    p_trunk, p_own = torch.exp(s_trunk - top), torch.exp(s_own - top)
    total = p_trunk.sum(-1, keepdim=True) + p_own.sum(-1, keepdim=True)
    from_trunk = (p_trunk.transpose(0, 1).reshape(hk, b * g * q, -1) @ tv).view(hk, b, g * q, d).transpose(0, 1)
    out = (from_trunk + p_own @ value) / total  # (B, Hkv, g*q, d)
    return out.reshape(b, h, q, d).transpose(1, 2).contiguous(), None


def register_shared_attention() -> str:
    """Make ``attn_implementation=SHARED_ATTENTION`` known to transformers (masks built as for SDPA); returns the name."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(SHARED_ATTENTION, shared_attention)
    AttentionMaskInterface.register(SHARED_ATTENTION, sdpa_mask)
    return SHARED_ATTENTION
