"""Tree attention through FlexAttention and a BlockMask: the GPU kernel, compiled, and runnable on CPU.

``attn_implementation="tree_flex"`` takes the pack's BlockMask (``PackedTree.block_mask``, built from
the tree's ``mask_mod``: query ``q`` sees key ``kv`` iff ``kv <= q < subtree_end[kv]``) as the
``attention_mask`` (``**pack.model_inputs("block")``) and runs ``flex_attention`` compiled once per
process with dynamic shapes, so packs of any length reuse one compiled kernel (torch 2.13's
default ``dynamic=None`` recompiles on the second length, and that recompile fails to build on CPU).

On CUDA forward and backward are flex's fused kernels. On CPU, torch 2.13 compiles flex's forward
(inductor's C++ template) but has no backward: ``flex_attention`` refuses inputs that require grad
there, and inductor has no CPU lowering of its backward. So on CPU the forward is that compiled
kernel and the backward walks the same BlockMask: for each query block, the live key blocks it
lists are gathered, the block's attention recomputed under ``mask_mod`` and differentiated (memory
O(block x live keys), as in ``tree_sdpa``). Everything but the CUDA kernels (the mask, its blocks,
the compile, the model wiring and the loss) is what a GPU run executes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from clawgym_env.errors import TreeError
from clawgym_env.tree.attention import live_blocks, masked_attention, tree_attention_forward

__all__ = [
    "TREE_FLEX",
    "compiled_flex_attention",
    "live_key_positions",
    "register_tree_flex",
    "tree_block_mask",
    "tree_flex_attention",
    "tree_flex_forward",
]

TREE_FLEX = "tree_flex"
"""The ``attn_implementation`` name transformers knows this attention under."""

_COMPILED: list[Callable[..., torch.Tensor]] = []


def _flex(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_mask: Any, scale: float | None) -> torch.Tensor:
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention(query, key, value, block_mask=block_mask, scale=scale, enable_gqa=query.shape[1] != key.shape[1])


def compiled_flex_attention() -> Callable[..., torch.Tensor]:
    """``flex_attention`` compiled with dynamic shapes, once per process (inductor also caches it on disk).

    A function of our own is compiled, not ``flex_attention`` itself: dynamo keeps its cache on the
    code object, so transformers' own ``torch.compile(flex_attention)`` (static first, then a dynamic
    recompile that fails to build on CPU) would otherwise share, and break, this one.
    """
    if not _COMPILED:
        _COMPILED.append(torch.compile(_flex, dynamic=True))
    return _COMPILED[0]


def tree_block_mask(subtree_end: torch.Tensor, block_size: int = 128, device: torch.device | str = "cpu") -> Any:
    """The pack's FlexAttention BlockMask, built from ``subtree_end`` in O(N + (N/block)^2).

    ``create_block_mask`` evaluates the mask_mod over all N x N positions (12.9 s and N^2 bytes for
    a 23k-token pack on CPU); here the live blocks come from the subtree ranges, as ``tree_sdpa``'s
    do. A live block is full (no mask_mod needed) when it lies before the query block and every one
    of its keys' subtrees reaches past the query block's end.
    """
    from torch.nn.attention.flex_attention import BlockMask

    from clawgym_env.tree.pack import tree_mask_mod

    n = int(subtree_end.shape[0])
    se = subtree_end.cpu().long()
    live = live_blocks(se, block_size)
    nb = int(live.shape[0])
    ends = torch.full((nb * block_size,), n, dtype=torch.long)
    ends[:n] = se
    reach = ends.view(nb, block_size).min(dim=1).values  # the earliest subtree end among each key block's tokens
    q_end = (torch.arange(nb) + 1) * block_size  # padded rows of a last, short block count: such a block is never full
    blocks = torch.arange(nb)
    full = live & (blocks[None, :] < blocks[:, None]) & (reach[None, :] >= q_end[:, None])
    partial = live & ~full

    def indices(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        order = torch.argsort((~m).to(torch.int8), dim=1, stable=True)  # the set blocks first, ascending
        return m.sum(dim=1).to(torch.int32)[None, None].to(device), order.to(torch.int32)[None, None].to(device)

    (kv_num, kv_idx), (full_num, full_idx) = indices(partial), indices(full)
    return BlockMask.from_kv_blocks(
        kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=block_size, mask_mod=tree_mask_mod(subtree_end.to(device)), seq_lengths=(n, n)
    )


def live_key_positions(block_mask: Any) -> list[torch.Tensor]:
    """Per query block of ``block_mask``: the key positions of its live blocks (partial and full), ascending."""
    q_len, kv_len = block_mask.seq_lengths
    kv_block = block_mask.BLOCK_SIZE[1]
    device = block_mask.kv_indices.device
    offsets = torch.arange(kv_block, device=device)
    out = []
    for qb in range(-(-q_len // block_mask.BLOCK_SIZE[0])):
        blocks = block_mask.kv_indices[0, 0, qb, : int(block_mask.kv_num_blocks[0, 0, qb])]
        if block_mask.full_kv_num_blocks is not None:
            full = block_mask.full_kv_indices[0, 0, qb, : int(block_mask.full_kv_num_blocks[0, 0, qb])]
            blocks = torch.cat([blocks, full])
        pos = (blocks.sort().values[:, None] * kv_block + offsets[None, :]).reshape(-1)
        out.append(pos[pos < kv_len])
    return out


class _FlexOnCPU(torch.autograd.Function):
    """Forward: the compiled flex kernel. Backward: per query block, the live keys' attention recomputed and differentiated."""

    @staticmethod
    def forward(
        ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_mask: Any, scale: float | None
    ) -> torch.Tensor:
        ctx.save_for_backward(query, key, value)
        ctx.block_mask, ctx.scale = block_mask, scale
        return compiled_flex_attention()(query.detach(), key.detach(), value.detach(), block_mask, scale)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        query, key, value = ctx.saved_tensors
        bm = ctx.block_mask
        dq, dk, dv = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
        q_block = bm.BLOCK_SIZE[0]
        zero = torch.zeros((), dtype=torch.long, device=query.device)
        for qb, keys in enumerate(live_key_positions(bm)):
            q0, q1 = qb * q_block, min((qb + 1) * q_block, query.shape[2])
            qpos = torch.arange(q0, q1, device=query.device)
            allowed = bm.mask_mod(zero, zero, qpos[:, None], keys[None, :])
            with torch.enable_grad():
                q = query[:, :, q0:q1].detach().requires_grad_()
                k = key.index_select(2, keys).detach().requires_grad_()
                v = value.index_select(2, keys).detach().requires_grad_()
                out = masked_attention(q, k, v, allowed, ctx.scale)
                gq, gk, gv = torch.autograd.grad(out, (q, k, v), grad_out[:, :, q0:q1])
            dq[:, :, q0:q1] = gq
            dk.index_add_(2, keys, gk)
            dv.index_add_(2, keys, gv)
        return dq, dk, dv, None, None


def tree_flex_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_mask: Any, *, scale: float | None = None
) -> torch.Tensor:
    """``[B, H, N, d]`` queries over ``[B, Hkv, N, d]`` keys/values under ``block_mask``, differentiable on CPU and CUDA."""
    grad = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)
    if grad and query.device.type == "cpu":
        return _FlexOnCPU.apply(query, key, value, block_mask, scale)
    return compiled_flex_attention()(query, key, value, block_mask, scale)


def tree_flex_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature; output ``[B, N, H, d]``.

    ``attention_mask`` is the pack's BlockMask; anything else (generation, a KV cache) goes to sdpa as
    in ``tree_sdpa``.
    """
    from torch.nn.attention.flex_attention import BlockMask

    if not isinstance(attention_mask, BlockMask):
        return tree_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    if dropout:
        raise TreeError(f"tree_flex: attention dropout {dropout} is not supported; set the model's attention_dropout to 0")
    q_len, kv_len = attention_mask.seq_lengths
    if (q_len, kv_len) != (query.shape[2], key.shape[2]):
        raise TreeError(
            f"tree_flex: BlockMask of {q_len}x{kv_len} for {query.shape[2]} query tokens; build it from this "
            "pack (pack.model_inputs('block'))"
        )
    out = tree_flex_attention(query, key, value, attention_mask, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


def register_tree_flex() -> str:
    """Make ``attn_implementation="tree_flex"`` loadable in transformers; returns the name."""
    from transformers import AttentionInterface

    AttentionInterface.register(TREE_FLEX, tree_flex_forward)
    return TREE_FLEX
