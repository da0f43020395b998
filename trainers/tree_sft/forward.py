"""The packed prefix-tree forward, with the shared prefix forwarded once and without gradient.

Why: Claude Code's first ~11.6k prompt tokens (system prompt + tool schemas) are the same in every
episode of every task, so a forest of its episodes is one long trunk and many short branches. The
dense tree mask over the whole pack costs O(N^2) memory and time on CPU; here the trunk (the leading
tokens every other token descends from, up to the first position whose logit a loss token needs)
runs as a plain causal forward under ``no_grad`` into a KV cache, and only the branches run with
gradient, attending to that cache through the rows of the tree mask that belong to them. Logits are
computed only where a loss token is predicted. The values are exactly the full forward's (tested);
the gradient leaves out how the weights shape the trunk's keys and values, which is what makes
a 12k-token harness prompt trainable on CPU. ``detach_prefix=False`` gives the full tree forward.
"""

from __future__ import annotations

from typing import Any

import torch

from clawgym_env.tree import PackedTree
from trainers.core.logprobs import head_logprobs

__all__ = ["DetachedTrunkForward", "shared_prefix_len", "tree_logprobs"]


def shared_prefix_len(pack: PackedTree) -> int:
    """Leading tokens every later token descends from, stopping before the first logit a loss token needs."""
    n = len(pack)
    trunk = int((pack.subtree_end == n).long().cumprod(0).sum())
    need = pack.prev_index[pack.loss_mask]
    return min(trunk, int(need.min())) if len(need) else trunk


def _rows_mask(subtree_end: torch.Tensor, start: int, kind: str, dtype: torch.dtype) -> torch.Tensor:
    """Rows ``start..N`` of the tree mask (query q sees key kv iff kv <= q < subtree_end[kv]), as [1, 1, S, N]."""
    n = subtree_end.shape[0]
    q = torch.arange(start, n, device=subtree_end.device)[:, None]
    kv = torch.arange(n, device=subtree_end.device)[None, :]
    allowed = (kv <= q) & (q < subtree_end[None, :])
    if kind == "bool":
        return allowed[None, None]
    mask = torch.zeros(allowed.shape, dtype=dtype, device=subtree_end.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def tree_logprobs(model: Any, pack: PackedTree, *, mask_kind: str = "bool", device: str | torch.device = "cpu",
                  detach_prefix: bool = True, min_prefix: int = 256, chunk_size: int = 1024,
                  inner: Any | None = None) -> torch.Tensor:
    """Logprob of each loss token of ``pack`` under ``model`` ([N]; 0 at tokens outside the loss).

    ``mask_kind`` is "bool" (sdpa) or "additive" (eager). A trunk shorter than ``min_prefix`` tokens
    is not worth a second forward and runs with the branches. The output head runs ``chunk_size``
    rows at a time (``trainers.core.logprobs.head_logprobs``). ``inner`` is the model itself when
    ``model`` is a wrapper that only forwards (DDP): the trunk (no gradient) runs on ``inner``'s
    decoder, the branches through ``model``'s own forward, so DDP prepares its gradient all-reduce.
    """
    inner = model if inner is None else inner
    dtype = next(model.parameters()).dtype
    ids = pack.input_ids[None].to(device)
    pos = pack.position_ids[None].to(device)
    start = shared_prefix_len(pack) if detach_prefix else 0
    if start < min_prefix:
        start = 0
    cache = None
    if start:
        with torch.no_grad():
            cache = inner.get_decoder()(input_ids=ids[:, :start], position_ids=pos[:, :start], use_cache=True).cache
    mask = _rows_mask(pack.subtree_end.to(device), start, mask_kind, dtype)
    out = model(input_ids=ids[:, start:], position_ids=pos[:, start:], attention_mask=mask, cache=cache,
                use_cache=cache is not None, output_hidden_states=True,
                logits_to_keep=torch.zeros(0, dtype=torch.long, device=device))
    hidden = out.hidden_states[-1][0]  # after the final norm: what the output head reads
    valid = (pack.loss_mask & (pack.prev_index >= 0)).to(device)
    rows = pack.prev_index.to(device)[valid] - start
    picked = head_logprobs(hidden[rows], inner.get_output_embeddings(), ids[0][valid], chunk_size)
    out = torch.zeros(len(pack), dtype=picked.dtype, device=device)
    out[valid] = picked
    return out


class DetachedTrunkForward:
    """Mixin for a ``TreeTrainerBase`` subclass: its packs go through ``tree_logprobs`` (trunk without gradient).

    Only loss tokens get a logprob (the rest are 0), which is all the policy loss and the mismatch
    metric read.
    """

    mask_kind: str
    device: Any
    accelerator: Any
    config: Any

    def forward_logprobs(self, model: Any, pack: PackedTree) -> torch.Tensor:
        # the branches go through the (DDP) wrapper's forward, so its gradient all-reduce runs (2-process test)
        return tree_logprobs(model, pack, device=self.device, mask_kind="bool" if self.mask_kind == "bool" else "additive",
                             chunk_size=self.config.logprob_chunk_size, inner=self.accelerator.unwrap_model(model))
