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

from collections.abc import Callable
from typing import Any

import torch

from clawgym_env.tree import PackedTree
from trainers.core.logprobs import head_logprobs

__all__ = ["DetachedTrunkForward", "TrunkCache", "loss_token_logprobs", "rows_mask", "shared_prefix_len", "trunk_start", "tree_logprobs"]


def shared_prefix_len(pack: PackedTree) -> int:
    """Leading tokens every later token descends from, stopping before the first logit a loss token needs."""
    n = len(pack)
    trunk = int((pack.subtree_end == n).long().cumprod(0).sum())
    need = pack.prev_index[pack.loss_mask]
    return min(trunk, int(need.min())) if len(need) else trunk


def trunk_start(pack: PackedTree, min_prefix: int) -> int:
    """Where the pack's branches start: its shared prefix (forwarded without gradient), or 0 when that is
    shorter than ``min_prefix`` tokens (not worth a separate forward)."""
    start = shared_prefix_len(pack)
    return start if start >= min_prefix else 0


TrunkForward = Callable[[int, int, Any], Any]
"""``(lo, hi, cache)``: forward trunk tokens ``lo..hi`` (causal) into ``cache`` (None: a new one) and return it."""


class TrunkCache:
    """The no-gradient KV of the last trunk forwarded, reused by the next pack that starts with the same tokens.

    Why: a harness's long system prompt is the trunk of every pack cut from its forest (Claude Code with
    Bash: 2.9k of a ~4k-token pack), so the packs of one optimizer step forward it once. Valid only while
    the weights are unchanged: make a new one after each optimizer step.
    """

    def __init__(self) -> None:
        self.ids: torch.Tensor | None = None
        self.pos: torch.Tensor | None = None
        self.cache: Any = None
        self.forwards = 0
        """Trunk forwards from the first token (the rest reused the kept trunk's common prefix)."""

    def _crop(self, n: int) -> None:
        for layer in self.cache.layers:  # drop the last pack's branches; detach: they were in its graph
            if layer.is_initialized:
                layer.keys, layer.values = layer.keys[..., :n, :].detach(), layer.values[..., :n, :].detach()
        assert self.ids is not None and self.pos is not None  # cropped only after a forward
        self.ids, self.pos = self.ids[:, :n], self.pos[:, :n]

    def get(self, ids: torch.Tensor, pos: torch.Tensor, start: int, forward: TrunkForward) -> Any:
        """A cache holding exactly the KV of ``ids[:, :start]`` at ``pos[:, :start]``: the part it shares with the
        kept trunk is reused, the rest forwarded."""
        kept = 0 if self.ids is None else min(start, int(self.ids.shape[1]))
        if kept:
            assert self.ids is not None and self.pos is not None
            same = (self.ids[0, :kept] == ids[0, :kept]) & (self.pos[0, :kept] == pos[0, :kept])
        else:
            same = torch.zeros(0, dtype=torch.bool)
        common = int(same.long().cumprod(0).sum())
        with torch.no_grad():
            if common:
                self._crop(common)
                if common < start:
                    self.cache = forward(common, start, self.cache)
            else:
                self.cache = forward(0, start, None)
                self.forwards += 1
        self.ids, self.pos = ids[:, :start], pos[:, :start]
        return self.cache


def rows_mask(subtree_end: torch.Tensor, start: int, kind: str, dtype: torch.dtype) -> torch.Tensor:
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


def tree_logprobs(
    model: Any,
    pack: PackedTree,
    *,
    mask_kind: str = "bool",
    device: str | torch.device = "cpu",
    detach_prefix: bool = True,
    min_prefix: int = 256,
    chunk_size: int = 1024,
    inner: Any | None = None,
    trunk: TrunkCache | None = None,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Logprob of each loss token of ``pack`` under ``model`` at ``temperature`` ([N]; 0 at tokens outside the loss).

    ``mask_kind`` is "bool" (sdpa) or "additive" (eager). A trunk shorter than ``min_prefix`` tokens
    is not worth a second forward and runs with the branches. The output head runs ``chunk_size``
    rows at a time (``trainers.core.logprobs.head_logprobs``). ``inner`` is the model itself when
    ``model`` is a wrapper that only forwards (DDP): the trunk (no gradient) runs on ``inner``'s
    decoder, the branches through ``model``'s own forward, so DDP prepares its gradient all-reduce.
    ``trunk`` keeps the trunk's KV for the next pack of the same step (``TrunkCache``); the pack's
    backward must run before the next pack's forward.
    """
    inner = model if inner is None else inner
    dtype = next(model.parameters()).dtype
    ids = pack.input_ids[None].to(device)
    pos = pack.position_ids[None].to(device)
    start = trunk_start(pack, min_prefix) if detach_prefix else 0
    cache = None
    if start:

        def forward(lo: int, hi: int, kv: Any) -> Any:
            return inner.get_decoder()(input_ids=ids[:, lo:hi], position_ids=pos[:, lo:hi], cache=kv, use_cache=True).cache

        cache = (trunk or TrunkCache()).get(ids, pos, start, forward)
    mask = rows_mask(pack.subtree_end.to(device), start, mask_kind, dtype)
    out = model(
        input_ids=ids[:, start:],
        position_ids=pos[:, start:],
        attention_mask=mask,
        cache=cache,
        use_cache=cache is not None,
        output_hidden_states=True,
        logits_to_keep=torch.zeros(0, dtype=torch.long, device=device),
    )
    # after the final norm: what the output head reads
    return loss_token_logprobs(out.hidden_states[-1][0], pack, start, inner.get_output_embeddings(), chunk_size, temperature)


def loss_token_logprobs(
    hidden: torch.Tensor, pack: PackedTree, start: int, head: Any, chunk_size: int, temperature: float = 1.0
) -> torch.Tensor:
    """``[N]`` logprobs at ``temperature`` of the loss tokens from the final-norm ``hidden`` of rows ``start..N`` (0 elsewhere)."""
    device = hidden.device
    valid = (pack.loss_mask & (pack.prev_index >= 0)).to(device)
    rows = pack.prev_index.to(device)[valid] - start
    picked = head_logprobs(hidden[rows], head, pack.input_ids.to(device)[valid], chunk_size, temperature)
    out = torch.zeros(len(pack), dtype=picked.dtype, device=device)
    out[valid] = picked
    return out


class DetachedTrunkForward:
    """Mixin for a ``TreeTrainerBase`` subclass: its packs go through ``tree_logprobs`` (trunk without gradient).

    Only loss tokens get a logprob (the rest are 0), which is all the policy loss and the mismatch
    metric read. Each model keeps its last trunk's KV (``TrunkCache``) from pack to pack: the
    reference model's for the whole run, the policy's until its next optimizer step (a post-step
    hook drops it), so the packs of one step forward a harness's shared system prompt once per model.
    """

    mask_kind: str
    device: Any
    accelerator: Any
    config: Any
    optimizer: Any
    model: Any

    def setup_models(self) -> None:
        super().setup_models()  # type: ignore[misc]  # a mixin over the trainer class
        self.trunks: dict[int, TrunkCache] = {}
        """id(unwrapped model) -> its kept trunk."""
        # accelerate's AcceleratedOptimizer steps the torch optimizer it wraps; its hooks fire there
        self.optimizer.optimizer.register_step_post_hook(lambda *_: self.forget_trunk(self.model))

    def forget_trunk(self, model: Any) -> None:
        """Drop ``model``'s kept trunk: its weights changed (an optimizer step, a loaded checkpoint)."""
        self.trunks.pop(id(self.accelerator.unwrap_model(model)), None)

    def load_checkpoint(self, path: Any) -> None:
        self.forget_trunk(self.model)
        super().load_checkpoint(path)  # type: ignore[misc]  # a mixin over the trainer class

    def forward_logprobs(self, model: Any, pack: PackedTree) -> torch.Tensor:
        # the branches go through the (DDP) wrapper's forward, so its gradient all-reduce runs (2-process test)
        inner = self.accelerator.unwrap_model(model)
        trunk = self.trunks.setdefault(id(inner), TrunkCache())
        return tree_logprobs(
            model,
            pack,
            device=self.device,
            mask_kind="bool" if self.mask_kind == "bool" else "additive",
            chunk_size=self.config.logprob_chunk_size,
            inner=inner,
            trunk=trunk,
            temperature=self.config.temperature,
        )
