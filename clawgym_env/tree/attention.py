"""Tree attention in memory linear in the pack: block-sparse SDPA, recomputed in backward.

The dense ``[N, N]`` tree mask (``tree_attention_mask``) costs N^2 bytes (bool) or 4 N^2 (additive)
before attention even starts: 4 GB at 32K tokens. Here the packed sequence is cut into query
blocks of ``block`` tokens; each query block attends, with ``scaled_dot_product_attention``, only to
the key blocks some query in it can see (the "live" blocks: ancestors' blocks, never sibling
branches), with a ``[block, live keys]`` mask built on the fly from ``subtree_end``. Each block runs
under activation checkpointing, so backward keeps only q, k, v (O(N)) and recomputes one block's
scores at a time. The GPU path is FlexAttention's BlockMask (``PackedTree.block_mask``), which
does the same block skipping inside one fused kernel.

transformers reaches it as ``attn_implementation="tree_sdpa"`` (``register_tree_attention``); the
pack's ``TreeBlocks`` travel to every layer as the ``tree_blocks`` keyword of the forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.functional import scaled_dot_product_attention
from torch.utils.checkpoint import checkpoint

from clawgym_env.errors import TreeError

__all__ = ["TREE_ATTENTION", "TreeBlocks", "live_blocks", "register_tree_attention", "tree_attention", "tree_attention_forward"]

TREE_ATTENTION = "tree_sdpa"
"""The ``attn_implementation`` name transformers knows this attention under."""


def live_blocks(subtree_end: torch.Tensor, block: int) -> torch.Tensor:
    """``[query block, key block]`` bool: some query of the block sees some key of the other, in O(N + (N/block)^2)."""
    n = int(subtree_end.shape[0])
    se = subtree_end.cpu().long()
    nb = -(-n // block)
    # key kv is seen by queries [kv, se[kv]): query blocks kv//block .. (se[kv]-1)//block
    diff = torch.zeros(nb + 1, nb, dtype=torch.int32)
    kb = torch.arange(n) // block
    diff.index_put_((kb, kb), torch.ones(n, dtype=torch.int32), accumulate=True)
    diff.index_put_(((se - 1) // block + 1, kb), torch.full((n,), -1, dtype=torch.int32), accumulate=True)
    return diff.cumsum(0)[:nb] > 0


@dataclass(frozen=True)
class TreeBlocks:
    """Which key positions each query block of a pack can see (computed once per pack, used by every layer)."""

    subtree_end: torch.Tensor  # [N] long: query q sees key kv iff kv <= q < subtree_end[kv]
    block: int
    keys: tuple[torch.Tensor, ...]  # per query block: the positions of its live key blocks, ascending

    @classmethod
    def build(cls, subtree_end: torch.Tensor, block: int = 256) -> TreeBlocks:
        """Live (query block, key block) pairs from ``subtree_end`` in O(N + (N/block)^2), no N x N tensor."""
        if block < 1:
            raise TreeError(f"TreeBlocks block={block}: set a positive block size (e.g. 256)")
        n = int(subtree_end.shape[0])
        live = live_blocks(subtree_end, block)
        nb = int(live.shape[0])
        keys = []
        for qb in range(nb):
            blocks = live[qb].nonzero()[:, 0]
            starts = blocks * block
            idx = (starts[:, None] + torch.arange(block)[None, :]).reshape(-1)
            keys.append(idx[idx < n].to(subtree_end.device))
        return cls(subtree_end, block, tuple(keys))

    @property
    def live_pairs(self) -> int:
        """(query, key) score entries computed per head and layer (vs N^2 / 2 for causal)."""
        n = int(self.subtree_end.shape[0])
        return sum(min(self.block, n - i * self.block) * int(k.shape[0]) for i, k in enumerate(self.keys))

    def to(self, device: torch.device | str) -> TreeBlocks:
        return TreeBlocks(self.subtree_end.to(device), self.block, tuple(k.to(device) for k in self.keys))


def _attend_block(
    q: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    keys: torch.Tensor,
    q0: int,
    subtree_end: torch.Tensor,
    scale: float | None,
    dropout: float,
) -> torch.Tensor:
    k = key.index_select(2, keys)
    v = value.index_select(2, keys)
    qpos = torch.arange(q0, q0 + q.shape[2], device=q.device)
    allowed = (keys[None, :] <= qpos[:, None]) & (qpos[:, None] < subtree_end[keys][None, :])
    return masked_attention(q, k, v, allowed, scale, dropout)


def masked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor, scale: float | None, dropout: float = 0.0
) -> torch.Tensor:
    """``[B, H, n, d]`` queries over gathered ``[B, Hkv, m, d]`` keys under an ``[n, m]`` bool mask (GQA aware)."""
    if q.device.type != "cpu":
        return scaled_dot_product_attention(
            q, k, v, attn_mask=allowed[None, None], dropout_p=dropout, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
        )
    # CPU: plain matmuls (the fused kernel's masked backward is ~5x slower); GQA by folding the query
    # heads of a key head into rows, so keys are never repeated
    b, h, n, d = q.shape
    hk = k.shape[1]
    qg = q.reshape(b, hk, (h // hk) * n, d) * (scale if scale is not None else d**-0.5)
    scores = (qg @ k.transpose(-1, -2)).view(b, hk, h // hk, n, -1).masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1).view(b, hk, (h // hk) * n, -1)
    if dropout:
        probs = torch.nn.functional.dropout(probs, dropout)
    return (probs @ v).view(b, h, n, d)


def tree_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, blocks: TreeBlocks, *, scale: float | None = None, dropout: float = 0.0
) -> torch.Tensor:
    """Attention of ``[B, H, N, d]`` queries over ``[B, Hkv, N, d]`` keys/values under the tree mask.

    Equals SDPA with the dense tree mask; memory O(N) for autograd (each block recomputed in backward).
    """
    n = query.shape[2]
    if int(blocks.subtree_end.shape[0]) != n:
        raise TreeError(
            f"tree attention: {n} query tokens but TreeBlocks of {int(blocks.subtree_end.shape[0])}; "
            "build TreeBlocks from this pack's subtree_end"
        )
    grad = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)
    outs = []
    for i, keys in enumerate(blocks.keys):
        q0 = i * blocks.block
        q = query[:, :, q0 : q0 + blocks.block]
        args = (q, key, value, keys, q0, blocks.subtree_end, scale, dropout)
        outs.append(checkpoint(_attend_block, *args, use_reentrant=False) if grad else _attend_block(*args))
    return torch.cat(outs, dim=2)


def tree_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    tree_blocks: TreeBlocks | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature; output ``[B, N, H, d]`` like its sdpa integration.

    Without ``tree_blocks`` it is transformers' sdpa with the mask it is given (a dense 4D mask, or
    causal, offset past a KV cache): a packed tree must come with ``**pack.model_inputs("tree")``.
    """
    if tree_blocks is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        q_len, kv_len = query.shape[2], key.shape[2]
        if attention_mask is None and kv_len > q_len:  # after a cache: causal with the offset (sdpa's is_causal is not)
            ar = torch.arange(kv_len, device=query.device)
            attention_mask = (ar[None, :] <= ar[kv_len - q_len :, None])[None, None]
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    out = tree_attention(query, key, value, tree_blocks, scale=scaling, dropout=dropout)
    return out.transpose(1, 2).contiguous(), None


def register_tree_attention() -> str:
    """Make ``attn_implementation="tree_sdpa"`` loadable in transformers; returns the name."""
    from transformers import AttentionInterface

    AttentionInterface.register(TREE_ATTENTION, tree_attention_forward)
    return TREE_ATTENTION
