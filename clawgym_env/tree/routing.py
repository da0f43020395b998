"""Give a prefix tree's tokens the experts the rollout routed them to, splitting nodes where calls disagree.

A shared token was routed once per call that forwarded it (each call prefilled its prompt, or
reused keys and values another forward computed: then that forward's routing is the call's). When
routing is replayed, a packed token has one routing, and every token below it is computed from its
output. If the calls through a token routed it alike, the node keeps that routing and the packed
forward reproduces each call's own forward. If they did not, no single routing reproduces both, so
the node is split there: the head stays shared, and the tail is laid out once per routing, each copy
holding the calls (and their subtrees) that routed it so. The tree loss then still equals the
per-call loss exactly, at the price of the duplicated tokens (``RoutingSplit.extra_tokens``).

Rows are compared as sets of experts per layer (the order of the top-k does not change a layer's
output). A position no call forwarded (a call's last sampled token, or calls captured without
routing) is left free (-1): the trainer routes it itself. Children of one node that hold the same
first token (routing variants) are keyed ``token + variant * 2**32``, so the usual key, the token id,
still finds the first one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawgym_env.capture.records import CallRecord
from clawgym_env.tree.build import PrefixTree
from clawgym_env.tree.node import BRANCH_KINDS, CallInfo, CallRef, TreeNode

if TYPE_CHECKING:
    import torch

__all__ = ["RoutingSplit", "pack_routing", "route_tree"]

_VARIANT = 1 << 32
_RANK = {k: i for i, k in enumerate(BRANCH_KINDS)}


@dataclass
class RoutingSplit:
    """How often the calls sharing a token routed it differently, and what splitting cost."""

    shared_tokens: int = 0
    """Tree positions that two or more calls forwarded (their routing could be compared)."""
    disagreeing_tokens: int = 0
    """Of those, positions where the calls' experts differ in some layer."""
    split_nodes: int = 0
    """Places a node was cut into one copy per routing."""
    extra_tokens: int = 0
    """Tokens the split tree holds beyond the unsplit one."""

    def metrics(self) -> dict[str, float]:
        return {
            "routing/shared_tokens": float(self.shared_tokens),
            "routing/disagreeing_tokens": float(self.disagreeing_tokens),
            "routing/split_nodes": float(self.split_nodes),
            "routing/split_extra_tokens": float(self.extra_tokens),
        }


def route_tree(tree: PrefixTree, calls: Iterable[CallRecord]) -> tuple[PrefixTree, RoutingSplit]:
    """A copy of ``tree`` whose nodes carry the calls' routing [len, layers, top_k] (int16, -1 free), split where
    calls disagree.

    ``calls``: the records the tree was built from (``CallRecord.routing``; calls without it are free). The input
    tree is left as it is. Without any routing, returns ``tree`` itself.
    """
    import numpy as np

    split = RoutingSplit()
    records = {CallRef(c.session_id, c.call_index): c for c in calls}
    rows = {
        ref: np.sort(c.routing.array(), axis=-1).astype(np.int16)
        for ref, c in records.items()
        if ref in tree.calls and c.routing is not None and c.routing.tokens
    }
    if not rows:
        return tree, split
    shape = next(iter(rows.values())).shape[1:]
    if any(r.shape[1:] != shape for r in rows.values()):
        raise ValueError(f"calls of one tree hold routing of different shapes: {sorted({r.shape[1:] for r in rows.values()})}")
    builder = _Builder(tree, rows, records, shape, split)
    for node in tree.nodes():  # how often the calls through a token routed it differently, on the tree as built
        builder._consensus(node, node.calls, 0, len(node))
        split.shared_tokens += int((builder.known > 1).sum())
        split.disagreeing_tokens += int(builder.bad.sum())
    root = TreeNode(tokens=[], depth=0, calls=list(tree.root.calls))
    for child in _children(tree.root):
        builder.span(child, root, [r for r in child.calls if r in tree.calls], 0)
    routed_calls: dict[CallRef, CallInfo] = {}
    for node in root.walk():
        for ref in node.ends:
            routed_calls[ref] = dataclasses.replace(tree.calls[ref], end=node)
    routed = PrefixTree(root=root, episodes=list(tree.episodes), calls=routed_calls, dropped=dict(tree.dropped))
    split.extra_tokens = routed.num_tokens - tree.num_tokens
    return routed, split


def _children(node: TreeNode) -> list[TreeNode]:
    return [node.children[k] for k in sorted(node.children)]


class _Builder:
    """Lays out the routed copy of a tree, span by span."""

    def __init__(
        self, tree: PrefixTree, rows: dict[CallRef, Any], records: dict[CallRef, CallRecord], shape: tuple[int, ...], split: RoutingSplit
    ) -> None:
        self.tree, self.rows, self.records, self.shape, self.split = tree, rows, records, shape, split
        self.known: Any = None  # the last consensus: calls that forwarded each position
        self.bad: Any = None  # and where their rows differ

    def span(self, orig: TreeNode, parent: TreeNode, group: list[CallRef], lo: int) -> None:
        """Copy ``orig.tokens[lo:]`` (and its subtree) for the calls ``group``, splitting where they disagree."""
        hi = len(orig)
        agreed, first_bad = self._consensus(orig, group, lo, hi)
        cut = hi if first_bad is None else first_bad
        node = parent
        if cut > lo:
            node = self._node(orig, parent, group, lo, cut, agreed[: cut - lo])
        if cut == hi:
            for child in _children(orig):
                members = set(child.calls)
                sub = [r for r in group if r in members]
                if sub:
                    self.span(child, node, sub, 0)
            return
        self.split.split_nodes += 1
        classes: dict[bytes, list[CallRef]] = {}
        free: list[CallRef] = []
        for ref in group:
            row = self._row(ref, orig.depth + cut)
            if row is None:
                free.append(ref)
            else:
                classes.setdefault(row.tobytes(), []).append(ref)
        parts = list(classes.values())
        parts[0].extend(free)
        for part in parts:
            self.span(orig, node, sorted(part, key=group.index), cut)

    def _row(self, ref: CallRef, pos: int) -> Any:
        r = self.rows.get(ref)
        return r[pos] if r is not None and pos < len(r) else None

    def _consensus(self, orig: TreeNode, group: list[CallRef], lo: int, hi: int) -> tuple[Any, int | None]:
        """The group's routing of ``orig.tokens[lo:hi]`` (first known row per position) and the first offset (in
        ``orig``) where two calls' rows differ."""
        import numpy as np

        a, b = orig.depth + lo, orig.depth + hi
        agreed = np.full((hi - lo, *self.shape), -1, dtype=np.int16)
        known = np.zeros(hi - lo, dtype=np.int32)
        bad = np.zeros(hi - lo, dtype=bool)
        for ref in group:
            r = self.rows.get(ref)
            if r is None or len(r) <= a:
                continue
            mine = r[a : min(b, len(r))]
            m = len(mine)
            seen = known[:m] > 0
            bad[:m] |= seen & (agreed[:m] != mine).reshape(m, -1).any(axis=1)
            agreed[:m][~seen] = mine[~seen]
            known[:m] += 1
        self.known, self.bad = known, bad
        return agreed, int(bad.argmax()) + lo if bool(bad.any()) else None

    def _node(self, orig: TreeNode, parent: TreeNode, group: list[CallRef], lo: int, hi: int, agreed: Any) -> TreeNode:
        """A copy of ``orig.tokens[lo:hi]`` for ``group``: its samplers, sampled flags, logprobs, calls and ends."""
        members = set(group)
        samplers: dict[int, list[CallRef]] = {}
        sampled, logprobs = [], []
        for off in range(lo, hi):
            mine = [r for r in orig.samplers.get(off, []) if r in members]
            if mine:
                samplers[off - lo] = mine
            sampled.append(bool(mine))
            logprobs.append(
                orig.logprobs[off]
                if mine and mine[0] == orig.samplers[off][0]
                else self._logprob(mine[0], orig.depth + off)
                if mine
                else float("nan")
            )
        calls = [r for r in orig.calls if r in members]
        node = TreeNode(
            tokens=orig.tokens[lo:hi],
            depth=orig.depth + lo,
            parent=parent,
            sampled=sampled,
            logprobs=logprobs,
            samplers=samplers,
            calls=calls,
            ends=[r for r in orig.ends if r in members] if hi == len(orig) else [],
            kind=min((self.tree.calls[r].kind for r in calls), key=_RANK.__getitem__, default=orig.kind),
            routing=agreed,
        )
        key = node.tokens[0]
        while key in parent.children:
            key += _VARIANT
        parent.children[key] = node
        return node

    def _logprob(self, ref: CallRef, pos: int) -> float:
        """The rollout logprob ``ref`` sampled position ``pos`` with (its own, where another call sampled it first)."""
        lps = self.records[ref].logprobs or []
        return float(lps[pos - self.tree.calls[ref].prompt_len])


def pack_routing(spans: list[tuple[TreeNode, int, int]], n: int) -> torch.Tensor | None:
    """The [N, layers, top_k] experts of a layout from its nodes' routing: ``(node, first index, tokens)`` spans; None
    for a tree without routing."""
    import torch

    shape = next((node.routing.shape[1:] for node, _, _ in spans if node.routing is not None), None)
    if shape is None:
        return None
    out = torch.full((n, *shape), -1, dtype=torch.long)
    for node, s, count in spans:
        if node.routing is not None and count:
            out[s : s + count] = torch.from_numpy(node.routing[:count]).long()
    return out
