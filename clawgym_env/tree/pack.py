"""Lay prefix trees into packed sequences for ONE forward pass, and the naive per-call layout.

Tokens are laid out in pre-order, so every subtree occupies a contiguous range. A token may
attend to key ``kv`` iff ``kv <= q < subtree_end[kv]``: exactly its ancestors and itself. That
single per-token array drives the dense 4D mask (eager/sdpa on CPU) and the FlexAttention
``mask_mod`` (GPU). Position ids are the token's depth in its tree, so every token sees the
same positions and context it had in its own call. The logit predicting token ``i`` sits at its
parent token ``prev_index[i]``, not at ``i - 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from clawgym_env.errors import TreeError
from clawgym_env.tree.build import PrefixTree
from clawgym_env.tree.naive import NaiveBatch, pack_naive
from clawgym_env.tree.node import CallRef, TreeNode
from clawgym_env.tree.routing import pack_routing

__all__ = [
    "NaiveBatch",
    "PackedTree",
    "pack_naive",
    "pack_tree",
    "pack_trees",
    "tree_attention_mask",
    "tree_mask_mod",
    "unpack_logprobs",
]

MaskKind = Literal["additive", "bool"]


def tree_mask_mod(subtree_end: torch.Tensor) -> Callable[..., torch.Tensor]:
    """FlexAttention ``mask_mod``: query ``q`` sees key ``kv`` iff ``kv <= q < subtree_end[kv]``."""

    def mask_mod(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return (kv_idx <= q_idx) & (q_idx < subtree_end[kv_idx])

    return mask_mod


def tree_attention_mask(subtree_end: torch.Tensor, kind: MaskKind = "additive", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Dense ``[1, 1, N, N]`` mask transformers takes as-is: bool (sdpa) or additive 0/-inf-ish (eager)."""
    n = subtree_end.shape[0]
    ar = torch.arange(n, device=subtree_end.device)
    allowed = (ar[None, :] <= ar[:, None]) & (ar[:, None] < subtree_end[None, :])
    if kind == "bool":
        return allowed[None, None]
    mask = torch.zeros((n, n), dtype=dtype, device=subtree_end.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


@dataclass
class PackedTree:
    """One packed sequence (tensors of length N) plus the map back to calls and rollouts."""

    input_ids: torch.Tensor  # [N] long
    position_ids: torch.Tensor  # [N] long: depth of the token in its tree
    prev_index: torch.Tensor  # [N] long: index of the token's parent token, -1 at a tree's first token
    subtree_end: torch.Tensor  # [N] long: one past the last index of the token's subtree
    loss_mask: torch.Tensor  # [N] bool: sampled tokens owned by this pack (each trainable token once overall)
    rollout_logprobs: torch.Tensor  # [N] float32: logprob at sampling time (0 where not in loss)
    rollout_index: torch.Tensor  # [N] long: rollout of the first call that sampled the token, -1 if none
    advantages: torch.Tensor  # [N] float32: slot filled by set_advantages
    sampler_token: torch.Tensor  # [M] long: (token, rollout) pairs, one per call that sampled a loss token
    sampler_rollout: torch.Tensor  # [M] long
    rollout_ids: list[str]
    call_tokens: dict[CallRef, torch.Tensor] = field(default_factory=dict)  # completion token indices per call
    context_tokens: int = 0  # ancestor tokens re-included only as context (split packs)
    spans: list[tuple[TreeNode, int, int]] = field(default_factory=list)  # (node, first index, tokens laid out), per node
    routing: torch.Tensor | None = None  # [N, MoE layers, top_k] long: experts the rollout routed each token to, -1 free
    call_counts: torch.Tensor | None = None  # [N] float32: calls whose path holds the token; 0 where it is only context

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_loss_tokens(self) -> int:
        """Trainable tokens this pack is responsible for."""
        return int(self.loss_mask.sum())

    def attention_mask(self, kind: MaskKind = "additive", dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Dense 4D tree mask; additive for eager attention, bool for sdpa."""
        return tree_attention_mask(self.subtree_end, kind, dtype)

    def mask_mod(self, device: torch.device | str | None = None) -> Callable[..., torch.Tensor]:
        """The FlexAttention mask_mod over this pack (its tensor moved to ``device``)."""
        return tree_mask_mod(self.subtree_end.to(device) if device is not None else self.subtree_end)

    def block_mask(self, device: torch.device | str = "cuda", block_size: int = 128) -> Any:
        """A FlexAttention BlockMask for this pack (``attn_implementation="tree_flex"``), built from the subtree ranges."""
        from clawgym_env.tree.flex import tree_block_mask

        return tree_block_mask(self.subtree_end, block_size, device)

    def tree_blocks(self, device: torch.device | str = "cpu", block_size: int = 256) -> Any:
        """The block-sparse form of the tree mask for ``attn_implementation="tree_sdpa"`` (O(N) memory)."""
        from clawgym_env.tree.attention import TreeBlocks

        return TreeBlocks.build(self.subtree_end.to(device), block_size)

    def model_inputs(
        self,
        mask: Literal["additive", "bool", "block", "tree"] = "additive",
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> dict[str, Any]:
        """Keyword arguments for a transformers causal LM: ids, depth positions and the tree mask.

        ``mask``: "additive" (eager) / "bool" (sdpa) build the dense N x N mask; "block" a FlexAttention
        BlockMask; "tree" passes ``tree_blocks`` for ``attn_implementation="tree_sdpa"`` (no N x N tensor).
        """
        inputs: dict[str, Any] = {"input_ids": self.input_ids[None].to(device), "position_ids": self.position_ids[None].to(device)}
        if mask == "tree":
            inputs["tree_blocks"] = self.tree_blocks(device)
        elif mask == "block":
            inputs["attention_mask"] = self.block_mask(device)
        else:
            inputs["attention_mask"] = self.attention_mask(mask, dtype).to(device)
        return inputs

    def padded(self, multiple: int, pad_id: int = 0) -> PackedTree:
        """A copy padded at the end to a multiple of ``multiple`` tokens (BlockMask / kernel alignment).

        Each pad token sees only itself and is outside the loss, so real tokens are unaffected.
        """
        n = len(self)
        extra = -n % multiple
        if not extra:
            return self
        idx = torch.arange(n, n + extra)

        def cat(t: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
            return torch.cat([t, tail.to(t.dtype)])

        return PackedTree(
            input_ids=cat(self.input_ids, torch.full((extra,), pad_id)),
            position_ids=cat(self.position_ids, torch.zeros(extra)),
            prev_index=cat(self.prev_index, torch.full((extra,), -1)),
            subtree_end=cat(self.subtree_end, idx + 1),
            loss_mask=cat(self.loss_mask, torch.zeros(extra)),
            rollout_logprobs=cat(self.rollout_logprobs, torch.zeros(extra)),
            rollout_index=cat(self.rollout_index, torch.full((extra,), -1)),
            advantages=cat(self.advantages, torch.zeros(extra)),
            sampler_token=self.sampler_token,
            sampler_rollout=self.sampler_rollout,
            rollout_ids=list(self.rollout_ids),
            call_tokens=dict(self.call_tokens),
            context_tokens=self.context_tokens + extra,
            spans=list(self.spans),
            routing=None if self.routing is None else cat(self.routing, self.routing.new_full((extra, *self.routing.shape[1:]), -1)),
            call_counts=None if self.call_counts is None else cat(self.call_counts, torch.zeros(extra)),
        )

    def token_logprobs(self, logits: torch.Tensor) -> torch.Tensor:
        """Logprob of every token under ``logits`` ([N, V] or [1, N, V]); 0 where no parent exists."""
        logits = logits.reshape(-1, logits.shape[-1])
        dev = logits.device
        valid = (self.prev_index >= 0).to(dev)
        prev = self.prev_index.to(dev)[valid]
        lse = torch.logsumexp(logits, dim=-1)  # [N]: no [N, V] copy of gathered rows
        out = torch.zeros(len(self), dtype=logits.dtype, device=dev)
        out[valid] = logits[prev, self.input_ids.to(dev)[valid]] - lse[prev]
        return out

    def set_advantages(self, per_rollout: Mapping[str, float] | Sequence[float]) -> torch.Tensor:
        """Fill ``advantages``: each loss token gets the sum over the calls that sampled it of their
        rollout's advantage, so the packed loss equals the per-call loss while forwarding each token once."""
        if isinstance(per_rollout, Mapping):
            missing = [r for r in self.rollout_ids if r not in per_rollout]
            if missing:
                raise TreeError(f"set_advantages: no advantage for rollouts {missing}; pass one per rollout id")
            values = torch.tensor([float(per_rollout[r]) for r in self.rollout_ids])
        else:
            if len(per_rollout) != len(self.rollout_ids):
                raise TreeError(f"set_advantages: {len(per_rollout)} values for {len(self.rollout_ids)} rollouts")
            values = torch.tensor([float(v) for v in per_rollout])
        adv = torch.zeros(len(self), dtype=torch.float32)
        adv.index_add_(0, self.sampler_token, values[self.sampler_rollout].float())
        self.advantages = adv
        return adv


def unpack_logprobs(packed: PackedTree, logits: torch.Tensor) -> dict[CallRef, torch.Tensor]:
    """Map one packed forward pass back to calls: each call's per-completion-token logprobs."""
    lp = packed.token_logprobs(logits)
    return {ref: lp[idx.to(lp.device)] for ref, idx in packed.call_tokens.items()}


# --- planning: which node prefixes each pack holds, and which part of them it owns ----------------

_Plan = dict[TreeNode, list[int]]  # node -> [hi, own_lo]: tokens [0, hi) included, [own_lo, hi) owned


def _plan(trees: Sequence[PrefixTree], max_tokens: int | None) -> list[_Plan]:
    if max_tokens is None:
        return [{n: [len(n), 0] for t in trees for n in t.nodes()}]
    if max_tokens < 1:
        raise TreeError(f"pack max_tokens={max_tokens}: set a positive token budget or None")
    longest = max((t.max_depth for t in trees), default=0)
    if max_tokens < longest:  # a pack must hold one whole call (its path from the root) to train its last token
        raise TreeError(
            f"pack_max_tokens={max_tokens} is below the longest root-to-leaf path ({longest} tokens: one call's "
            f"prompt + completion); raise pack_max_tokens to at least {longest}, or None for one pack"
        )
    plans: list[_Plan] = []
    cur: _Plan = {}
    used = 0
    for tree in trees:
        for node in tree.nodes():
            anc = [a for a in node.ancestors() if not a.is_root]
            pos = 0
            while pos < len(node):
                ctx = sum(len(a) for a in anc if a not in cur) + (0 if node in cur else pos)
                room = max_tokens - used - ctx
                left = len(node) - pos
                if room <= 0 or (room < left and room < max_tokens // 8 and used):
                    plans.append(cur)  # used > 0 here: an empty pack has room, as max_tokens >= the longest path
                    cur, used = {}, 0
                    continue
                for a in anc:
                    cur.setdefault(a, [len(a), len(a)])
                entry = cur.setdefault(node, [pos, pos])
                take = min(room, left)
                entry[0] += take
                used += ctx + take
                pos += take
    if cur:
        plans.append(cur)
    return plans


def _layout(trees: Sequence[PrefixTree], plan: _Plan) -> PackedTree:
    rollout_ids: list[str] = []
    rollout_of: dict[tuple[int, str], int] = {}
    tree_of: dict[TreeNode, int] = {}
    for ti, tree in enumerate(trees):
        for ep in tree.episodes:
            rollout_of[(ti, ep)] = len(rollout_ids)
            rollout_ids.append(ep if len(trees) == 1 else f"{ti}:{ep}")
        tree_of[tree.root] = ti
    ids: list[int] = []
    pos: list[int] = []
    prev: list[int] = []
    loss: list[bool] = []
    lps: list[float] = []
    rix: list[int] = []
    ncalls: list[int] = []
    s_tok: list[int] = []
    s_roll: list[int] = []
    start: dict[TreeNode, int] = {}
    end_of: dict[TreeNode, int] = {}
    stack: list[TreeNode] = []
    context = 0
    for node, (hi, own_lo) in plan.items():
        parent = node.parent
        while stack and stack[-1] is not parent:
            end_of[stack.pop()] = len(ids)
        root = node
        while root.parent is not None:
            root = root.parent
        ti = tree_of[root]
        start[node] = len(ids)
        last = start[parent] + plan[parent][0] - 1 if parent in plan else -1
        for off in range(hi):
            ids.append(node.tokens[off])
            pos.append(node.depth + off)
            prev.append(len(ids) - 2 if off else last)
            owned = off >= own_lo
            context += not owned
            ncalls.append(len(node.calls) if owned else 0)
            is_loss = owned and node.sampled[off]
            loss.append(is_loss)
            lps.append(node.logprobs[off] if is_loss else 0.0)
            samplers = node.samplers.get(off, []) if is_loss else []
            rix.append(rollout_of[(ti, samplers[0].episode_id)] if samplers else -1)
            for ref in samplers:
                s_tok.append(len(ids) - 1)
                s_roll.append(rollout_of[(ti, ref.episode_id)])
        stack.append(node)
    while stack:
        end_of[stack.pop()] = len(ids)
    sub_end = [0] * len(ids)
    for node, s in start.items():
        sub_end[s : s + plan[node][0]] = [end_of[node]] * plan[node][0]
    packed = PackedTree(
        input_ids=torch.tensor(ids, dtype=torch.long),
        position_ids=torch.tensor(pos, dtype=torch.long),
        prev_index=torch.tensor(prev, dtype=torch.long),
        subtree_end=torch.tensor(sub_end, dtype=torch.long),
        loss_mask=torch.tensor(loss, dtype=torch.bool),
        rollout_logprobs=torch.tensor(lps, dtype=torch.float32),
        rollout_index=torch.tensor(rix, dtype=torch.long),
        advantages=torch.zeros(len(ids), dtype=torch.float32),
        sampler_token=torch.tensor(s_tok, dtype=torch.long),
        sampler_rollout=torch.tensor(s_roll, dtype=torch.long),
        rollout_ids=rollout_ids,
        context_tokens=context,
    )
    packed.call_tokens = _call_tokens(trees, plan, start)
    packed.spans = [(node, s, plan[node][0]) for node, s in start.items()]
    packed.routing = pack_routing(packed.spans, len(ids))
    packed.call_counts = torch.tensor(ncalls, dtype=torch.float32)
    return packed


def _call_tokens(trees: Sequence[PrefixTree], plan: _Plan, start: Mapping[TreeNode, int]) -> dict[CallRef, torch.Tensor]:
    """Completion indices of the calls whose last token this pack owns (each call in exactly one pack)."""
    out: dict[CallRef, torch.Tensor] = {}
    multi = len(trees) > 1
    for ti, tree in enumerate(trees):
        for ref, info in tree.calls.items():
            node = info.end
            if node is None or node not in plan:
                continue
            hi, own_lo = plan[node]
            if hi != len(node) or own_lo >= hi:
                continue
            idx: list[int] = []
            for n in [*node.ancestors(), node]:
                if not n.is_root:
                    idx.extend(range(start[n], start[n] + len(n)))
            key = CallRef(f"{ti}:{ref.episode_id}", ref.call_index) if multi else ref
            out[key] = torch.tensor(idx[info.prompt_len :], dtype=torch.long)
    return out


def pack_trees(trees: PrefixTree | Sequence[PrefixTree], max_tokens: int | None = None) -> list[PackedTree]:
    """Pack one or several trees into as few sequences of at most ``max_tokens`` as the greedy plan needs.

    Nodes are visited in pre-order; a pack that cannot take a node's next tokens is closed and the
    next one re-includes the node's ancestor path (and any part of the node already packed) as
    non-trainable context, so no trainable token is lost or trained twice and every call's full
    path lies in the pack that owns its last token. With several trees, rollout and call ids are
    prefixed with the tree's index (``"0:episode"``).
    """
    seq = [trees] if isinstance(trees, PrefixTree) else list(trees)
    return [_layout(seq, plan) for plan in _plan(seq, max_tokens)]


def pack_tree(tree: PrefixTree | Sequence[PrefixTree]) -> PackedTree:
    """The whole tree (or trees) in one packed sequence."""
    return pack_trees(tree, None)[0]
