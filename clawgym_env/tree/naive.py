"""The naive per-call layout: one row per call (prompt + completion), what the packed tree is checked against.

A packed tree forwards each shared token once; this layout forwards every call's whole path, as
chain-merging frameworks end up doing. Tests and benches compare the two (same logprobs, same loss).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from clawgym_env.tree.build import PrefixTree
from clawgym_env.tree.node import CallRef, TreeNode
from clawgym_env.tree.routing import pack_routing

__all__ = ["NaiveBatch", "pack_naive"]


@dataclass
class NaiveBatch:
    """One row per call (prompt + completion), the layout chain-merging frameworks end up with."""

    rows: list[torch.Tensor]  # each [L_i] long
    refs: list[CallRef]
    prompt_lens: list[int]
    loss_masks: list[torch.Tensor]  # [L_i] bool: sampled completion tokens
    rollout_logprobs: list[torch.Tensor]  # [L_i] float32
    rollout_index: list[int]
    routing: list[torch.Tensor] | None = None  # each [L_i, MoE layers, top_k] long, -1 free (routed trees)

    @property
    def num_tokens(self) -> int:
        """Tokens forwarded (no padding counted)."""
        return sum(int(r.shape[0]) for r in self.rows)

    def padded(self, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded ``input_ids`` and 2D ``attention_mask`` for a batched forward."""
        width = max(int(r.shape[0]) for r in self.rows)
        ids = torch.full((len(self.rows), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(self.rows), width), dtype=torch.long)
        for i, r in enumerate(self.rows):
            ids[i, : r.shape[0]] = r
            mask[i, : r.shape[0]] = 1
        return ids, mask

    def row_logprobs(self, i: int, logits: torch.Tensor) -> torch.Tensor:
        """Completion-token logprobs of row ``i`` from its own forward's logits ([L, V] or [1, L, V])."""
        logits = logits.reshape(-1, logits.shape[-1])
        row = self.rows[i].to(logits.device)
        lp = torch.log_softmax(logits[: row.shape[0] - 1], dim=-1).gather(-1, row[1:, None])[:, 0]
        return lp[self.prompt_lens[i] - 1 :]


def pack_naive(tree: PrefixTree) -> NaiveBatch:
    """Every call of the tree as its own row, rebuilt from the tree (so filters apply equally)."""
    rows, refs, plens, masks, lps, rix = [], [], [], [], [], []
    for ref in sorted(tree.calls, key=lambda r: (tree.rollout_index(r.episode_id), r.call_index)):
        info = tree.calls[ref]
        prompt, completion = tree.call_path(ref)
        row = torch.tensor(prompt + completion, dtype=torch.long)
        mask = torch.zeros(row.shape[0], dtype=torch.bool)
        lp = torch.zeros(row.shape[0], dtype=torch.float32)
        if info.trainable:
            mask[len(prompt) :] = True
            node_lps = _path_logprobs(info.end)  # type: ignore[arg-type]  # a trainable call ends at a node
            lp[len(prompt) :] = torch.tensor(node_lps[len(prompt) :], dtype=torch.float32)
        rows.append(row)
        refs.append(ref)
        plens.append(len(prompt))
        masks.append(mask)
        lps.append(lp)
        rix.append(tree.rollout_index(ref.episode_id))
    routed = any(n.routing is not None for n in tree.nodes())
    routing = [_path_routing(tree.calls[r].end) for r in refs] if routed else None  # type: ignore[arg-type]  # every call ends at a node
    return NaiveBatch(rows, refs, plens, masks, lps, rix, routing)


def _path_routing(node: TreeNode) -> torch.Tensor:
    """The [L, layers, top_k] experts along the path from the root to ``node``'s last token."""
    spans, at = [], 0
    for n in [*node.ancestors(), node]:
        spans.append((n, at, len(n)))
        at += len(n)
    out = pack_routing(spans, at)
    assert out is not None
    return out


def _path_logprobs(node: TreeNode) -> list[float]:
    out: list[float] = []
    for n in [*node.ancestors(), node]:
        out.extend(n.logprobs)
    return out
