"""Structure-preserving shrinks of captured calls, so real captures fit CPU tests and benchmarks.

Cutting the head that EVERY call shares, and renumbering token ids one-to-one onto a compact
range, leave the tree's shape (branch points, leaves, which tokens are sampled) unchanged: only
the shared trunk gets shorter and the vocabulary smaller.
"""

from __future__ import annotations

from collections.abc import Sequence

from clawgym_env.capture.records import CallRecord

__all__ = ["compact_vocab", "trim_shared_head"]


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
        c.model_copy(update={
            "prompt_ids": [index[t] for t in c.prompt_ids or []],
            "completion_ids": [index[t] for t in c.completion_ids or []] if c.completion_ids is not None else None,
        })
        for c in calls
    ]
    return out, len(used)
