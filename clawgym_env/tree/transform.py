"""Structure-preserving shrinks of captured calls, so real captures fit CPU tests and benchmarks.

Cutting the head that EVERY call shares, and renumbering token ids one-to-one onto a compact
range, leave the tree's shape (branch points, leaves, which tokens are sampled) unchanged: only
the shared trunk gets shorter and the vocabulary smaller.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from clawgym_env.capture.records import CallRecord

__all__ = ["compact_vocab", "shrink_spans", "trim_shared_head"]


def _common_prefix(paths: Sequence[Sequence[int]]) -> int:
    n = min(len(p) for p in paths)
    first = paths[0]
    for i in range(n):
        t = first[i]
        if any(p[i] != t for p in paths):
            return i
    return n


def trim_shared_head(calls: Sequence[CallRecord], keep: int) -> list[CallRecord]:
    """Drop the prompt head all calls share, keeping its last ``keep`` tokens (and always >= 1 prompt token)."""
    prompts = [c.prompt_ids or [] for c in calls]
    cut = max(0, min(_common_prefix(prompts), min(len(p) for p in prompts) - 1) - keep)
    return [c.model_copy(update={"prompt_ids": list(c.prompt_ids or [])[cut:]}) for c in calls]


def compact_vocab(calls: Sequence[CallRecord]) -> tuple[list[CallRecord], int]:
    """Renumber the ids used one-to-one onto 0..V-1 (sorted order); returns the calls and V."""
    used = sorted({t for c in calls for t in (c.prompt_ids or [])} | {t for c in calls for t in (c.completion_ids or [])})
    index = {t: i for i, t in enumerate(used)}
    out = [
        c.model_copy(
            update={
                "prompt_ids": [index[t] for t in c.prompt_ids or []],
                "completion_ids": [index[t] for t in c.completion_ids or []] if c.completion_ids is not None else None,
            }
        )
        for c in calls
    ]
    return out, len(used)


def shrink_spans(calls: Sequence[CallRecord], keep: int) -> list[CallRecord]:
    """Cut every run of prompt-only tokens in the calls' prefix tree to its last ``keep`` tokens.

    Each node keeps its first token (what tells it from its siblings), every token some call completed there and
    every earlier completion a later prompt re-sends; so the tree keeps its branch points, its call ends, all
    completions and what tells a continuation from a new conversation (``tree/classify.py`` gives the same
    classes with ``keep`` >= 32), and only its prompt spans get shorter. For CPU tests and benchmarks of long
    real captures (Claude Code's ~30k-token prompts). Every call is kept, foreign ones too; calls without token
    ids pass through.
    """
    from clawgym_env.tree.build import TreeFilters, build_tree
    from clawgym_env.tree.node import CallRef

    if keep < 1:
        raise ValueError(f"shrink_spans keep={keep}: keep at least one token of each run")
    tree = build_tree(calls, filters=TreeFilters(keep_foreign=True))
    completed: dict[int, set[int]] = {}  # id(node) -> offsets to keep: completed there, or a re-sent completion
    outputs = [array("q", c.completion_ids).tobytes() for c in calls if c.completion_ids]
    for info in tree.calls.values():
        assert info.end is not None
        nodes = [n for n in [*info.end.ancestors(), info.end] if not n.is_root]
        for node in nodes:
            if node.end_depth > info.prompt_len:
                completed.setdefault(id(node), set()).update(range(max(0, info.prompt_len - node.depth), len(node)))
        prompt = array("q", info.end.path_tokens()[: info.prompt_len]).tobytes()
        for done in outputs:
            at = prompt.find(done)
            while at != -1 and at % 8:
                at = prompt.find(done, at + 1)
            if at != -1:
                resent = range(at // 8, at // 8 + len(done) // 8)
                for node in nodes:
                    completed.setdefault(id(node), set()).update(p - node.depth for p in resent if node.depth <= p < node.end_depth)
    kept: dict[int, list[int]] = {}
    for node in tree.nodes():
        mine = completed.get(id(node), set())
        run: list[int] = []
        out: list[int] = []
        for off in range(len(node)):
            if off == 0 or off in mine:
                out.extend(run[-keep:])
                run = []
                out.append(off)
            else:
                run.append(off)
        out.extend(run[-keep:])
        kept[id(node)] = out
    shrunk: list[CallRecord] = []
    for c in calls:
        placed = tree.calls.get(CallRef(c.session_id, c.call_index))
        if placed is None or placed.end is None:
            shrunk.append(c)
            continue
        ids: list[int] = []
        for node in [*placed.end.ancestors(), placed.end]:
            if not node.is_root:
                ids.extend(node.tokens[o] for o in kept[id(node)])
        shrunk.append(c.model_copy(update={"prompt_ids": ids[: len(ids) - placed.completion_len]}))
    return shrunk
