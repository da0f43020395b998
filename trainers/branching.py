"""Branching rollouts for tree training: where to branch a recorded episode, and what each branch is worth.

A group of one (task, harness) pair starts from root rollouts; branch points are picked among
each root's calls (uniformly, or where the policy was least sure, from the captured logprobs);
each branch is the same task rerun with ``ReplayBackend(root.calls, k, policy)`` through the
same executor as every other episode, so its calls 0..k-1 are the root's tokens and the group's
forest splits at call k. Values and advantages here are pure functions of that forest and the
episodes' rewards (TreeRL-style), so they can be tested on toy trees:

- ``node_values``: V(n) = mean reward of the rollouts whose paths run through node n;
- ``step_advantages``: per node, ``(V(n) - V(root)) + (V(n) - V(parent))`` scaled by
  ``1/sqrt(leaves under n)``: the global term is the group baseline, the local one credits the
  step that was taken at a branch point.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ConfigError
from clawgym_env.tree import PrefixTree
from clawgym_env.tree.node import TreeNode

if TYPE_CHECKING:
    from clawgym_env.episode import EpisodeResult
    from trainers.rollout_stream import RolloutStream

__all__ = ["BranchMode", "branch_points", "call_surprisal", "node_values", "sample_branched_group", "step_advantages"]

BranchMode = Literal["uniform", "entropy"]


def call_surprisal(call: CallRecord) -> float:
    """Mean -logprob of a call's sampled tokens: a one-sample estimate of the policy's entropy there."""
    lps = [lp for lp in call.logprobs or () if lp is not None and math.isfinite(lp)]
    return -sum(lps) / len(lps) if lps else 0.0


def branch_points(calls: Sequence[CallRecord], n: int, *, mode: BranchMode = "uniform",
                  rng: random.Random | None = None) -> list[int]:
    """``n`` call indexes to branch a recorded episode at (with repeats when ``n`` exceeds the calls).

    Call 0 is never chosen (branching there is an independent rollout); a call that failed and the
    calls after it are never chosen (they cannot be replayed up to). ``entropy`` takes the calls
    with the highest surprisal first.
    """
    if mode not in ("uniform", "entropy"):
        raise ConfigError(f"branch_points: mode must be 'uniform' or 'entropy', got {mode!r}")
    ordered = sorted(calls, key=lambda c: c.call_index)
    first_bad = next((i for i, c in enumerate(ordered) if c.error or not (c.completion_ids or c.completion_text)),
                     len(ordered))
    candidates = list(range(1, first_bad + 1 if first_bad < len(ordered) else len(ordered)))
    if not candidates or n <= 0:
        return []
    if mode == "uniform":
        r = rng or random.Random(0)
        return [r.choice(candidates) for _ in range(n)]
    ranked = sorted(candidates, key=lambda k: (-call_surprisal(ordered[k]), k))
    return [ranked[i % len(ranked)] for i in range(n)]


def _rollouts(node: TreeNode) -> set[str]:
    return {ref.episode_id for ref in node.calls}


def node_values(tree: PrefixTree, rewards: Mapping[str, float]) -> dict[int, float]:
    """id(node) -> mean reward of the rollouts (with a reward) whose paths run through it."""
    values: dict[int, float] = {}
    for node in tree.nodes():
        rs = [rewards[e] for e in _rollouts(node) if e in rewards]
        if rs:
            values[id(node)] = sum(rs) / len(rs)
    root = [rewards[e] for e in tree.episodes if e in rewards]
    values[id(tree.root)] = sum(root) / len(root) if root else 0.0
    return values


def step_advantages(tree: PrefixTree, rewards: Mapping[str, float]) -> dict[int, float]:
    """id(node) -> TreeRL step advantage of the tokens in that node (0 where no rollout reached it)."""
    values = node_values(tree, rewards)
    v_root = values[id(tree.root)]
    out: dict[int, float] = {}
    for node in tree.nodes():
        v = values.get(id(node))
        if v is None:
            out[id(node)] = 0.0
            continue
        parent = node.parent if node.parent is not None else tree.root
        v_parent = values.get(id(parent), v_root)
        leaves = max(1, len(_rollouts(node) & set(rewards)))
        out[id(node)] = ((v - v_root) + (v - v_parent)) / math.sqrt(leaves)
    return out


def sample_branched_group(stream: RolloutStream, pair: tuple[Any, Any], *, roots: int, branches: int, workdir: Path,
                          mode: BranchMode = "uniform", rng: random.Random | None = None) -> list[EpisodeResult]:
    """One group: ``roots`` fresh rollouts, then ``branches`` replays of them branched at chosen calls.

    Every episode runs through ``stream``'s executor (local or Ray), like any other rollout; the
    roots' captures are written to ``workdir`` for the branches to replay.
    """
    from clawgym_env.capture.store import CaptureWriter

    rng = rng or random.Random(0)
    root_eps = stream.run_now([pair], roots)[0]
    usable = [ep for ep in root_eps if len(ep.calls) > 1]
    if not usable or branches <= 0:
        return root_eps
    workdir.mkdir(parents=True, exist_ok=True)
    replays: list[tuple[str, int]] = []
    for j in range(branches):
        root = usable[j % len(usable)]
        path = workdir / f"{root.session_id}.jsonl"
        if not path.exists():
            writer = CaptureWriter(path, fsync=False)
            for c in root.calls:
                writer.write(c)
            writer.close()
        replays += [(str(path), k) for k in branch_points(root.calls, 1, mode=mode, rng=rng)]
    return root_eps + stream.run_now([pair], replays=replays)[0]
