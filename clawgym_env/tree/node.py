"""Data of a token prefix tree: radix-compressed nodes, call references, per-call facts.

A node holds a span of token ids shared by every call whose path runs through it. Per token it
keeps whether the token was *sampled* (trainable) and with which rollout logprob; a token that
was sampled in one call and re-sent as prompt in a later call sits at one position of the trie,
so it is trainable exactly once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

__all__ = ["BRANCH_KINDS", "BranchKind", "CallInfo", "CallRef", "TreeNode"]

BranchKind = Literal["main", "subagent", "compaction", "retry", "foreign"]
# Order matters: a node shared by calls of several kinds takes the earliest kind listed here.
BRANCH_KINDS: tuple[BranchKind, ...] = ("main", "subagent", "compaction", "retry", "foreign")
"""``tree/classify.py`` says how each is told from the requests: ``foreign`` is a call no behaviour of the
harness explains (left out of training unless ``TreeFilters.keep_foreign``)."""


class CallRef(NamedTuple):
    """Identifies one captured call: its episode (rollout) and its index in that episode."""

    episode_id: str
    call_index: int


@dataclass
class CallInfo:
    """What the tree knows about one inserted call (enough to rebuild and to report it)."""

    ref: CallRef
    prompt_len: int
    completion_len: int
    kind: BranchKind
    dead: bool  # failed, superseded by a retry, or never continued by a later call
    trainable: bool  # completion ids were sampled by the policy (token_source == "sampled")
    latency_s: float = 0.0
    finish_reason: str = "stop"
    end: TreeNode | None = field(default=None, repr=False)  # node whose last token ends the call's path
    chain: str = "main"  # line of work: main, subagent:<first call>, foreign:<first call>
    parent: int | None = None  # call index this call continues or retries; None where it starts a conversation
    evidence: str = ""  # why the classifier placed it so (tree/classify.py)

    @property
    def path_len(self) -> int:
        """Prompt plus completion length: the tokens a per-call layout forwards for this call."""
        return self.prompt_len + self.completion_len


@dataclass(eq=False)
class TreeNode:
    """A radix-compressed span of tokens; children are keyed by their first token id."""

    tokens: list[int]
    depth: int  # absolute position (0-based) of tokens[0] on every path through this node
    parent: TreeNode | None = field(default=None, repr=False)
    sampled: list[bool] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # NaN where not sampled
    samplers: dict[int, list[CallRef]] = field(default_factory=dict)  # offset -> calls that sampled it
    calls: list[CallRef] = field(default_factory=list)  # calls whose path runs through this node
    ends: list[CallRef] = field(default_factory=list)  # calls whose path ends at this node's last token
    children: dict[int, TreeNode] = field(default_factory=dict, repr=False)
    kind: BranchKind = "main"
    routing: Any = field(default=None, repr=False)
    """Mixture-of-experts trees: [len, MoE layers, top_k] int16 experts the calls routed each token to, -1 where
    none did (set by ``tree/routing.py``, which keys a second child of the same first token ``token + v * 2**32``)."""

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def is_root(self) -> bool:
        """The root is the only node without a parent; it holds no tokens."""
        return self.parent is None

    @property
    def is_leaf(self) -> bool:
        """A node no path continues past."""
        return not self.children

    @property
    def end_depth(self) -> int:
        """Absolute position just past this node's last token."""
        return self.depth + len(self.tokens)

    @property
    def num_sampled(self) -> int:
        """Trainable tokens in this node."""
        return sum(self.sampled)

    def split(self, offset: int) -> TreeNode:
        """Cut this node at ``offset``; the tail becomes the single child. Returns the tail."""
        if not 0 < offset < len(self.tokens):
            raise ValueError(f"split offset {offset} outside (0, {len(self.tokens)})")
        tail = TreeNode(
            tokens=self.tokens[offset:],
            depth=self.depth + offset,
            parent=self,
            sampled=self.sampled[offset:],
            logprobs=self.logprobs[offset:],
            samplers={k - offset: v for k, v in self.samplers.items() if k >= offset},
            calls=list(self.calls),
            ends=self.ends,
            children=self.children,
            kind=self.kind,
            routing=None if self.routing is None else self.routing[offset:],
        )
        for child in tail.children.values():
            child.parent = tail
        self.tokens = self.tokens[:offset]
        self.sampled = self.sampled[:offset]
        self.logprobs = self.logprobs[:offset]
        self.samplers = {k: v for k, v in self.samplers.items() if k < offset}
        self.routing = None if self.routing is None else self.routing[:offset]
        self.ends = []
        self.children = {tail.tokens[0]: tail}
        return tail

    def mark_sampled(self, offset: int, logprob: float, ref: CallRef) -> None:
        """Flag the token at ``offset`` as sampled by ``ref``; the first rollout logprob wins."""
        if not self.sampled[offset]:
            self.sampled[offset] = True
            self.logprobs[offset] = logprob
        self.samplers.setdefault(offset, []).append(ref)

    def walk(self) -> Iterator[TreeNode]:
        """Pre-order traversal (this node first), children in first-token order; iterative."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children[k] for k in sorted(node.children, reverse=True))

    def ancestors(self) -> list[TreeNode]:
        """Nodes from the root (included) down to this node's parent."""
        out: list[TreeNode] = []
        node = self.parent
        while node is not None:
            out.append(node)
            node = node.parent
        out.reverse()
        return out

    def path_tokens(self) -> list[int]:
        """All tokens from the root through this node's last token."""
        out: list[int] = []
        for node in [*self.ancestors(), self]:
            out.extend(node.tokens)
        return out


def new_span(tokens: list[int], depth: int, parent: TreeNode) -> TreeNode:
    """A fresh node with nothing sampled yet."""
    return TreeNode(
        tokens=list(tokens),
        depth=depth,
        parent=parent,
        sampled=[False] * len(tokens),
        logprobs=[math.nan] * len(tokens),
    )
