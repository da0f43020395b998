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
  step that was taken at a branch point. A step is the run of nodes the same rollouts share (the
  radix tree also splits where a call ends), so its parent is the step above the last branch
  point, and every token of one step gets the same credit.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ConfigError
from clawgym_env.tree import PackedTree, PrefixTree
from clawgym_env.tree.node import TreeNode

if TYPE_CHECKING:
    from clawgym_env.episode import EpisodeResult
    from trainers.rollout_stream import RolloutStream

__all__ = ["BranchMode", "branch_points", "call_surprisal", "node_values", "sample_branched_groups", "step_advantages", "token_values"]

BranchMode = Literal["uniform", "entropy"]


def call_surprisal(call: CallRecord) -> float:
    """Mean -logprob of a call's sampled tokens: a one-sample estimate of the policy's entropy there."""
    lps = [lp for lp in call.logprobs or () if lp is not None and math.isfinite(lp)]
    return -sum(lps) / len(lps) if lps else 0.0


def branch_points(calls: Sequence[CallRecord], n: int, *, mode: BranchMode = "uniform", rng: random.Random | None = None) -> list[int]:
    """``n`` call indexes to branch a recorded episode at (with repeats when ``n`` exceeds the calls).

    Call 0 is never chosen (branching there is an independent rollout); a call that failed and the
    calls after it are never chosen (they cannot be replayed up to). ``entropy`` takes the calls
    with the highest surprisal first.
    """
    if mode not in ("uniform", "entropy"):
        raise ConfigError(f"branch_points: mode must be 'uniform' or 'entropy', got {mode!r}")
    ordered = sorted(calls, key=lambda c: c.call_index)
    first_bad = next((i for i, c in enumerate(ordered) if c.error or not (c.completion_ids or c.completion_text)), len(ordered))
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
    scored = set(rewards)
    out: dict[int, float] = {}
    for node in tree.nodes():
        v = values.get(id(node))
        if v is None:
            out[id(node)] = 0.0
            continue
        mine = _rollouts(node) & scored
        step = node.parent
        while step is not None and not step.is_root and _rollouts(step) & scored == mine:
            step = step.parent  # the same rollouts: one step, split only where a call ended
        v_parent = v_root if step is None or step.is_root else values.get(id(step), v_root)
        out[id(node)] = ((v - v_root) + (v - v_parent)) / math.sqrt(max(1, len(mine)))
    return out


def token_values(pack: PackedTree, tree: PrefixTree, rewards: Mapping[str, float]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token of ``pack`` (a pack of ``tree``): its node's value V(n) and TreeRL step advantage, as [N] tensors.

    What a branched group trains on: each loss token once, with the credit of the node it sits in,
    however many rollouts ran through it (sampled there or replayed).
    """
    values, adv = node_values(tree, rewards), step_advantages(tree, rewards)
    v = torch.zeros(len(pack), dtype=torch.float32)
    a = torch.zeros(len(pack), dtype=torch.float32)
    for node, start, n in pack.spans:
        v[start : start + n] = values.get(id(node), 0.0)
        a[start : start + n] = adv.get(id(node), 0.0)
    return v, a


def _replays(
    roots: Sequence[EpisodeResult], points: int, per_point: int, mode: BranchMode, rng: random.Random, workdir: Path, written: list[Path]
) -> list[tuple[str, int]]:
    """(capture path, k) per branch: ``points`` calls spread over the roots that have one, ``per_point`` branches each."""
    from clawgym_env.capture.store import CaptureWriter

    usable = [ep for ep in roots if ep.status != "error" and branch_points(ep.calls, 1, mode=mode, rng=random.Random(0))]
    if not usable:
        return []
    share = [points // len(usable) + (j < points % len(usable)) for j in range(len(usable))]
    out: list[tuple[str, int]] = []
    for root, n in zip(usable, share, strict=True):
        if not n:
            continue
        path = workdir / f"{root.session_id}.jsonl"
        writer = CaptureWriter(path, fsync=False)
        for c in root.calls:
            writer.write(c)
        writer.close()
        written.append(path)
        out += [(str(path), k) for k in branch_points(root.calls, n, mode=mode, rng=rng) for _ in range(per_point)]
    return out


def sample_branched_groups(
    stream: RolloutStream,
    pairs: Sequence[tuple[Any, Any]],
    *,
    roots: int,
    points: int,
    workdir: Path,
    per_point: int = 1,
    mode: BranchMode = "uniform",
    rng: random.Random | None = None,
) -> list[list[EpisodeResult]]:
    """One group per pair: ``roots`` fresh rollouts, then ``per_point`` replays of them at each of ``points`` calls.

    Every episode runs through ``stream``'s executor (local or Ray), like any other rollout: all
    groups' roots at once, then all their branches at once. The roots' captures are written to
    ``workdir`` for the branches to replay and removed after. A group whose roots have no call to
    branch at (one-call episodes) is its roots alone.
    """
    rng = rng or random.Random(0)
    groups = stream.run_now(pairs, roots)
    workdir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        plans = [(gi, r) for gi, eps in enumerate(groups) if (r := _replays(eps, points, per_point, mode, rng, workdir, written))]
        gids = [stream.request([pairs[gi]], side=True, replays=r)[0] for gi, r in plans]
        for (gi, _), branches in zip(plans, stream.wait(gids), strict=True):
            groups[gi] = groups[gi] + branches
    finally:
        for path in written:
            path.unlink(missing_ok=True)
    return groups
