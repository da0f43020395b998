"""Build a prefix tree (trie over token ids) from captured calls, one episode or a GRPO group.

Every call's ``prompt_ids + completion_ids`` is inserted as a root-to-node path. Calls of
several episodes (rollouts of one task and harness) share one root, so their common prompt is
stored once; every call keeps its episode id, which is what advantages are attached to.
"""

from __future__ import annotations

import gzip
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import CaptureError, TreeError
from clawgym_env.tree.classify import classify_episode
from clawgym_env.tree.node import (
    BRANCH_KINDS,
    BranchKind,
    CallInfo,
    CallRef,
    TreeNode,
    new_span,
)

__all__ = ["PrefixTree", "TreeFilters", "build_forest", "build_tree", "load_calls"]


@dataclass(frozen=True)
class TreeFilters:
    """Switchable filters applied while building; all off by default.

    drop_dead: leave out calls whose completion was abandoned (failed, superseded by a retry of the
        same prompt, or never continued by a later call): the retry subtrees / dead leaves.
    max_leaves: leave out whole episodes whose own tree has more leaves than this.
    exclude_kinds: leave out calls of these branch kinds (e.g. {"subagent", "compaction"}).
    keep_foreign: keep calls no behaviour of the harness explains (``foreign``); they are left out unless set, so
        a policy's own requests through the proxy never train (views set it to show them).
    """

    drop_dead: bool = False
    max_leaves: int | None = None
    exclude_kinds: frozenset[BranchKind] = frozenset()
    keep_foreign: bool = False

    def __post_init__(self) -> None:
        bad = set(self.exclude_kinds) - set(BRANCH_KINDS)
        if bad:
            raise TreeError(f"TreeFilters.exclude_kinds: unknown kinds {sorted(bad)}; use some of {list(BRANCH_KINDS)}")
        if self.max_leaves is not None and self.max_leaves < 1:
            raise TreeError(f"TreeFilters.max_leaves={self.max_leaves}: set a positive count or None")


@dataclass
class PrefixTree:
    """A trie over token ids of one or more episodes; ``root`` holds no tokens."""

    root: TreeNode
    episodes: list[str]  # rollout ids; a rollout's index in this list is its rollout index
    calls: dict[CallRef, CallInfo]
    dropped: dict[str, list[str]] = field(default_factory=dict)  # reason -> episode ids or call refs
    kind_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    """Episode -> branch kind -> calls the classifier gave that kind, kept in the tree or left out."""

    def nodes(self) -> list[TreeNode]:
        """All token-holding nodes in pre-order (the layout order used by packing)."""
        return [n for n in self.root.walk() if not n.is_root]

    def leaves(self) -> list[TreeNode]:
        """Nodes no path continues past."""
        return [n for n in self.nodes() if n.is_leaf]

    def branch_points(self) -> list[TreeNode]:
        """Nodes (the root included) where paths diverge."""
        return [n for n in self.root.walk() if len(n.children) > 1]

    @property
    def num_tokens(self) -> int:
        """Unique tokens: what one packed forward pass over the whole tree computes."""
        return sum(len(n) for n in self.nodes())

    @property
    def num_trainable(self) -> int:
        """Unique sampled tokens, each counted once however many calls carry it."""
        return sum(n.num_sampled for n in self.nodes())

    @property
    def max_depth(self) -> int:
        """Longest root-to-leaf path: the smallest token budget a split pack can work with."""
        return max((n.end_depth for n in self.leaves()), default=0)

    @property
    def naive_tokens(self) -> int:
        """Tokens a one-row-per-call layout forwards (prompt + completion of every call)."""
        return sum(c.path_len for c in self.calls.values())

    def rollout_index(self, episode_id: str) -> int:
        """Index of an episode among this tree's rollouts."""
        try:
            return self.episodes.index(episode_id)
        except ValueError:
            raise TreeError(f"episode {episode_id!r} is not in this tree; known: {self.episodes}") from None

    def call_path(self, ref: CallRef) -> tuple[list[int], list[int]]:
        """Rebuild a call's exact (prompt_ids, completion_ids) by walking up from its end node."""
        info = self.calls.get(ref)
        if info is None or info.end is None:
            raise TreeError(f"call {ref} is not in this tree (filtered or never inserted)")
        path = info.end.path_tokens()
        return path[: info.prompt_len], path[info.prompt_len :]

    def foreign_counts(self) -> dict[str, int]:
        """Foreign calls per episode, kept in the tree or left out (0 for an episode with none)."""
        return {ep: kinds.get("foreign", 0) for ep, kinds in self.kind_counts.items()}

    def leaf_counts(self) -> dict[str, int]:
        """Leaves of each episode's own subtree (a node no call of that episode continues past)."""
        return _leaf_counts(self.root)

    def stats(self) -> dict[str, float]:
        """Headline counts: calls, nodes, leaves, unique vs per-call tokens and their ratio."""
        unique = self.num_tokens
        return {
            "episodes": len(self.episodes),
            "calls": len(self.calls),
            "nodes": len(self.nodes()),
            "leaves": len(self.leaves()),
            "branch_points": len(self.branch_points()),
            "unique_tokens": unique,
            "trainable_tokens": self.num_trainable,
            "naive_tokens": self.naive_tokens,
            "naive_over_tree": (self.naive_tokens / unique) if unique else math.nan,
        }


def load_calls(path: Path | str) -> list[CallRecord]:
    """Read one capture JSONL (one CallRecord per line, format 1 or 2); ``.gz`` files are decompressed."""
    from clawgym_env.capture.store import parse_capture, read_capture

    p = Path(path)
    if p.suffix != ".gz":
        return read_capture(p)
    if not p.is_file():
        raise CaptureError(f"capture file {p} does not exist; pass the JSONL(.gz) the proxy wrote")
    try:
        raw = gzip.decompress(p.read_bytes())
    except (OSError, EOFError) as exc:
        raise CaptureError(f"{p}: not a gzipped capture of CallRecords ({exc})") from exc
    return parse_capture(raw, str(p), strict=True)


def _insert(root: TreeNode, path: Sequence[int], prompt_len: int, logprobs: Sequence[float] | None, ref: CallRef) -> TreeNode:
    """Insert one call's path; returns the node its last token ends. Splits nodes as needed."""
    node, i = root, 0
    node.calls.append(ref)
    while i < len(path):
        child = node.children.get(path[i])
        if child is None:
            child = new_span(list(path[i:]), i, node)
            node.children[path[i]] = child
            k = len(child)
        else:
            k, limit = 1, min(len(child), len(path) - i)
            while k < limit and child.tokens[k] == path[i + k]:
                k += 1
            if k < len(child):
                child.split(k)
        child.calls.append(ref)
        if logprobs is not None:
            for off in range(max(0, prompt_len - i), k):
                child.mark_sampled(off, float(logprobs[i + off - prompt_len]), ref)
        node, i = child, i + k
    node.ends.append(ref)
    return node


def _leaf_counts(root: TreeNode) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for node in root.walk():
        if node.is_root:
            continue
        mine = {r.episode_id for r in node.calls}
        below = {r.episode_id for c in node.children.values() for r in c.calls}
        for ep in mine - below:
            counts[ep] += 1
    return dict(counts)


def _assign_kinds(root: TreeNode, calls: Mapping[CallRef, CallInfo]) -> None:
    rank = {k: i for i, k in enumerate(BRANCH_KINDS)}
    for node in root.walk():
        if node.calls:
            node.kind = min((calls[r].kind for r in node.calls), key=rank.__getitem__)


def _check(call: CallRecord) -> None:
    where = f"call {call.call_index} of session {call.session_id!r}"
    if not call.prompt_ids:
        raise TreeError(f"{where}: prompt_ids is empty; only token-level captures can form a tree")
    n = len(call.completion_ids or ())
    if call.token_source == "sampled" and call.logprobs is not None and len(call.logprobs) != n:
        raise TreeError(f"{where}: {len(call.logprobs)} logprobs for {n} completion ids; the capture is corrupt")


def build_tree(calls: Iterable[CallRecord], *, filters: TreeFilters | None = None) -> PrefixTree:
    """Build one tree from captured calls; calls of several sessions become a forest under one root.

    Calls without token ids (API passthrough captures) cannot be placed and are listed in
    ``dropped["no_token_ids"]``. A completion is trainable only if its ids were sampled
    (``token_source == "sampled"``) and logprobs were captured.
    """
    filters = filters or TreeFilters()
    by_episode: dict[str, list[CallRecord]] = defaultdict(list)
    dropped: dict[str, list[str]] = defaultdict(list)
    seen: set[CallRef] = set()
    for call in calls:
        if not call.prompt_ids:
            dropped["no_token_ids"].append(str(CallRef(call.session_id, call.call_index)))
            continue
        _check(call)
        ref = CallRef(call.session_id, call.call_index)
        if ref in seen:
            raise TreeError(f"call {call.call_index} of session {call.session_id!r} appears twice; pass each capture file once")
        seen.add(ref)
        by_episode[call.session_id].append(call)
    root = TreeNode(tokens=[], depth=0)
    infos: dict[CallRef, CallInfo] = {}
    episodes: list[str] = []
    kind_counts: dict[str, dict[str, int]] = {}
    for episode_id, ep_calls in by_episode.items():
        if filters.max_leaves is not None:  # count the episode's leaves on a scratch tree first
            scratch = TreeNode(tokens=[], depth=0)
            _insert_episode(scratch, ep_calls, filters, None)
            if _leaf_counts(scratch).get(episode_id, 0) > filters.max_leaves:
                dropped["too_many_leaves"].append(episode_id)
                continue
        ep_infos = _insert_episode(root, ep_calls, filters, dropped, kind_counts.setdefault(episode_id, {}))
        if ep_infos:
            episodes.append(episode_id)
            infos.update(ep_infos)
    for node in root.walk():  # splits move call ends to tails: point each call at its final node
        for ref in node.ends:
            infos[ref].end = node
    _assign_kinds(root, infos)
    return PrefixTree(root=root, episodes=episodes, calls=infos, dropped=dict(dropped), kind_counts=kind_counts)


def _insert_episode(
    root: TreeNode,
    calls: list[CallRecord],
    filters: TreeFilters,
    dropped: dict[str, list[str]] | None,
    counts: dict[str, int] | None = None,
) -> dict[CallRef, CallInfo]:
    """Classify one episode's calls (``tree/classify.py``) and insert those the filters keep; ``counts``: filled
    with the calls of each kind, kept or not."""
    classes = classify_episode(calls)
    infos: dict[CallRef, CallInfo] = {}
    for call in sorted(calls, key=lambda c: c.call_index):
        ref = CallRef(call.session_id, call.call_index)
        cls = classes[call.call_index]
        kind, dead = cls.kind, cls.dead
        if counts is not None:
            counts[kind] = counts.get(kind, 0) + 1
        excluded = kind in filters.exclude_kinds or (kind == "foreign" and not filters.keep_foreign)
        reason = f"kind:{kind}" if excluded else "dead" if filters.drop_dead and dead else None
        if reason:
            if dropped is not None:
                dropped[reason].append(str(ref))
            continue
        completion = list(call.completion_ids or ())
        trainable = call.token_source == "sampled" and call.logprobs is not None and bool(completion)
        prompt = list(call.prompt_ids or ())
        end = _insert(root, prompt + completion, len(prompt), call.logprobs if trainable else None, ref)
        infos[ref] = CallInfo(
            ref=ref,
            prompt_len=len(prompt),
            completion_len=len(completion),
            kind=kind,
            dead=dead,
            trainable=trainable,
            latency_s=call.latency_s,
            finish_reason=call.finish_reason,
            end=end,
            chain=cls.chain,
            parent=cls.parent,
            evidence=cls.evidence,
        )
    return infos


def build_forest(episodes: Iterable[Iterable[CallRecord]], *, filters: TreeFilters | None = None) -> PrefixTree:
    """Merge the episodes of one GRPO group (same task and harness) into one tree."""
    return build_tree((c for ep in episodes for c in ep), filters=filters)
