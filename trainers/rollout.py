"""Rollouts for tree training: sample (task, harness) pairs, run each pair's group of episodes
through real harnesses in sandboxes, and turn each group into one prefix tree.

Everything here is ours (TRL's ``rollout_func`` returns flat completions; a harness episode is a
tree of calls): mix-harness sampling by weight, the policy version recorded per call
(``CallRecord.policy_version``), dropping infrastructure failures and groups sampled by weights
too old, and the tree filters (retry subtrees, too many leaves, subagent branches). Episodes run
through the benchmark's executor (``trainers.rollout_stream``; local or Ray). Advantages are left
to the trainer (GRPO and PPO differ); ``RolloutBatch.rewards`` holds what they need.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from clawgym_env.errors import ConfigError
from clawgym_env.tree import PrefixTree, TreeFilters, build_forest
from clawgym_env.tree.routing import RoutingSplit, route_tree

if TYPE_CHECKING:
    from clawgym_env.episode import EpisodeResult
    from clawgym_env.harness import Harness
    from clawgym_env.proxy.backends.base import PolicyBackend
    from clawgym_env.task import TaskSpec

__all__ = [
    "CRASHED_POLICIES",
    "CrashedPolicy",
    "Group",
    "RolloutBatch",
    "build_batch",
    "collect",
    "collect_episodes",
    "episode_reward",
    "group_staleness",
    "harness_name",
    "make_group",
    "rollout_metrics",
    "sample_pairs",
    "StratifiedTasks",
    "TASK_SAMPLING",
    "tree_filters",
]

CrashedPolicy = Literal["mask", "penalize"]
CRASHED_POLICIES: tuple[str, ...] = ("mask", "penalize")
TASK_SAMPLING: tuple[str, ...] = ("uniform", "stratified")


@dataclass
class Group:
    """The n rollouts of one (task, harness) pair and the tree built from the ones that train."""

    task_id: str
    harness: str
    rewards: dict[str, float]
    """Session id -> score, for every episode that counts towards the group's baseline."""
    tree: PrefixTree | None = None
    dropped: dict[str, list[str]] = field(default_factory=dict)
    """Reason -> session ids or call refs left out (error, stale, tree filters)."""
    statuses: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    generated_tokens: int = 0
    """Completion tokens the policy sampled for this group (replayed and scripted calls not counted)."""
    versions: set[int] = field(default_factory=set)
    """Policy versions that sampled the group's calls (as recorded in every capture)."""
    routing: RoutingSplit | None = None
    """Mixture-of-experts captures: how often the calls sharing a token routed it differently (``tree`` is split there)."""

    @property
    def zero_variance(self) -> bool:
        """All rewards equal: GRPO advantages would all be 0."""
        values = list(self.rewards.values())
        return len(values) < 2 or max(values) - min(values) < 1e-9

    @property
    def mean_reward(self) -> float:
        return sum(self.rewards.values()) / len(self.rewards) if self.rewards else 0.0


@dataclass
class RolloutBatch:
    """One step's rollouts: groups that train, groups skipped (and why), per-harness metrics."""

    groups: list[Group]
    skipped: list[tuple[Group, str]] = field(default_factory=list)
    policy_version: int = 0
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def all_groups(self) -> list[Group]:
        return self.groups + [g for g, _ in self.skipped]


def tree_filters(*, drop_retries: bool, max_leaves: int | None, exclude_subagents: bool) -> TreeFilters:
    """The paper's filters from the config switches. Foreign calls (no behaviour of the harness explains them:
    ``clawgym_env.tree.classify``) are always left out; ``rollout_metrics`` counts them and every call a filter
    left out (``dropped/<reason>``)."""
    kinds: frozenset[Any] = frozenset({"subagent", "compaction"}) if exclude_subagents else frozenset()
    return TreeFilters(drop_dead=drop_retries, max_leaves=max_leaves, exclude_kinds=kinds)


def harness_name(harness: str | Harness) -> str:
    """The name a harness is reported under (an adapter instance: its ``name``)."""
    return harness if isinstance(harness, str) else harness.name


class StratifiedTasks:
    """Task draws in rounds: each round of ``len(categories)`` draws covers every task category (template) once,
    in a shuffled order, with the variant drawn uniformly within it.

    Uniform draws over a few steps leave some templates unseen, so a shortcut that one template pays
    (``echo N > file``) meets no counter-signal from the templates it breaks. With ``pairs_per_step`` a
    multiple of the category count, every synchronous step trains on every template. A resumed run
    starts a fresh round.
    """

    def __init__(self, tasks: Sequence[TaskSpec]) -> None:
        if not tasks:
            raise ConfigError("StratifiedTasks: no task to sample; check --suite and --tasks")
        by_category: dict[str, list[TaskSpec]] = defaultdict(list)
        for t in tasks:
            by_category[t.category].append(t)
        self.by_category = dict(sorted(by_category.items()))
        self._round: list[str] = []

    def draw(self, rng: random.Random) -> TaskSpec:
        if not self._round:
            self._round = list(self.by_category)
            rng.shuffle(self._round)
        return rng.choice(self.by_category[self._round.pop()])


def sample_pairs(
    tasks: Sequence[TaskSpec],
    harnesses: Sequence[str | Harness],
    weights: Sequence[float],
    k: int,
    rng: random.Random,
    strata: StratifiedTasks | None = None,
) -> list[tuple[TaskSpec, str | Harness]]:
    """Draw ``k`` (task, harness) pairs: the harness by ``weights``, the task uniformly (or in ``strata``'s rounds)."""
    if not tasks:
        raise ConfigError("sample_pairs: no task to sample; check --suite and --tasks")
    if len(harnesses) != len(weights):
        raise ConfigError(f"sample_pairs: {len(weights)} weights for {len(harnesses)} harnesses; set one weight per harness")
    pool = list(tasks)

    def task() -> TaskSpec:
        return strata.draw(rng) if strata is not None else rng.choice(pool)

    return [(task(), rng.choices(list(harnesses), weights=list(weights))[0]) for _ in range(k)]


def episode_reward(ep: EpisodeResult, crashed: CrashedPolicy = "penalize", crashed_reward: float = 0.0) -> float | None:
    """The reward an episode enters the group with, or None when it is left out of baseline and loss.

    "error" (our infrastructure: a sandbox, the policy backend) is always left out. A "crashed" harness
    (non-zero exit: Claude Code giving up after its output-limit retries, a harness the agent's own command
    killed, a prompt grown past the policy's context) trains with ``crashed_reward`` under
    ``crashed="penalize"``, the default: a crash never passes in ``bench run`` either, and the agent can
    always crash its harness (``kill $PPID``), so leaving crashes out would be its way out of a failing
    grade. ``crashed="mask"`` leaves them out, for a harness known to crash on its own. A harness the
    sandbox stopped at a limit (``limit_hit``: memory, pids, output) trains on its verdict under either.
    """
    if ep.status == "error":
        return None
    if ep.status == "crashed" and ep.limit_hit is None:
        if crashed not in CRASHED_POLICIES:
            raise ConfigError(f"crashed_episodes={crashed!r}: use one of {list(CRASHED_POLICIES)}")
        return None if crashed == "mask" else float(crashed_reward)
    return float(ep.score)


def make_group(
    task_id: str,
    harness: str,
    episodes: Sequence[EpisodeResult],
    *,
    filters: TreeFilters,
    crashed: CrashedPolicy = "penalize",
    crashed_reward: float = 0.0,
) -> Group:
    """Keep the episodes that count, then build the group's tree from those that can train.

    Infrastructure failures (status "error") are left out of the baseline; crashed harnesses
    enter it with ``crashed_reward`` unless masked (``episode_reward``). Staleness is judged per group, by the stream's consumer
    (``group_staleness``).
    """
    group = Group(task_id=task_id, harness=harness, rewards={})
    dropped: dict[str, list[str]] = defaultdict(list)
    trainable = []
    for ep in episodes:
        group.statuses[ep.status] = group.statuses.get(ep.status, 0) + 1
        group.calls += len(ep.calls)
        group.generated_tokens += sum(len(c.completion_ids or ()) for c in ep.calls if c.token_source == "sampled")
        reward = episode_reward(ep, crashed, crashed_reward)
        if reward is None:
            dropped[ep.status].append(ep.session_id)  # "error" or "crashed"
            continue
        group.rewards[ep.session_id] = reward
        group.versions.update(c.policy_version for c in ep.calls if c.policy_version is not None)
        if ep.calls:
            trainable.append(ep.calls)
    if trainable:
        group.tree = build_forest(trainable, filters=filters)
        routed = [c for calls in trainable for c in calls if c.routing is not None]
        if routed:  # a MoE policy's captures: each node keeps the routing its calls agree on (clawgym_env.tree.routing)
            group.tree, group.routing = route_tree(group.tree, routed)
        for reason, items in group.tree.dropped.items():
            dropped[reason].extend(items)
    group.dropped = dict(dropped)
    return group


def group_staleness(episodes: Sequence[EpisodeResult], policy_version: int) -> int:
    """Versions between the trainer's ``policy_version`` and the oldest weights that sampled a call that trains."""
    versions = [c.policy_version for ep in episodes if ep.status != "error" for c in ep.calls if c.policy_version is not None]
    return policy_version - min(versions) if versions else 0


def build_batch(
    groups: Sequence[tuple[TaskSpec, str | Harness, Sequence[EpisodeResult]]],
    *,
    filters: TreeFilters,
    policy_version: int,
    skip_zero_variance: bool = True,
    crashed: CrashedPolicy = "penalize",
    crashed_reward: float = 0.0,
) -> RolloutBatch:
    """Build every group's tree and set aside groups that cannot train."""
    batch = RolloutBatch(groups=[], policy_version=policy_version)
    for task, harness, episodes in groups:
        group = make_group(task.full_id, harness_name(harness), episodes, filters=filters, crashed=crashed, crashed_reward=crashed_reward)
        if group.tree is None or not group.tree.episodes:
            batch.skipped.append((group, "no trainable episode"))
        elif skip_zero_variance and group.zero_variance:
            batch.skipped.append((group, "zero reward variance"))
        else:
            batch.groups.append(group)
    batch.metrics = rollout_metrics(batch)
    return batch


def collect(
    tasks: Sequence[TaskSpec],
    harnesses: Sequence[str | Harness],
    weights: Sequence[float],
    backend: PolicyBackend,
    *,
    pairs_per_step: int,
    num_generations: int,
    rng: random.Random,
    filters: TreeFilters,
    policy_version: int,
    skip_zero_variance: bool = True,
    sandbox: str = "bwrap",
    sampling: dict[str, Any] | None = None,
    concurrency: int = 8,
    wall_time_s: float | None = None,
) -> RolloutBatch:
    """One step's batch from ``backend`` in this process (the local executor, started and stopped here)."""
    groups = collect_episodes(
        tasks,
        harnesses,
        weights,
        backend,
        pairs_per_step=pairs_per_step,
        num_generations=num_generations,
        rng=rng,
        sandbox=sandbox,
        sampling=sampling,
        concurrency=concurrency,
        wall_time_s=wall_time_s,
    )
    return build_batch(groups, filters=filters, policy_version=policy_version, skip_zero_variance=skip_zero_variance)


def collect_episodes(
    tasks: Sequence[TaskSpec],
    harnesses: Sequence[str | Harness],
    weights: Sequence[float],
    backend: PolicyBackend,
    *,
    pairs_per_step: int,
    num_generations: int,
    rng: random.Random,
    sandbox: str = "bwrap",
    sampling: dict[str, Any] | None = None,
    concurrency: int = 8,
    wall_time_s: float | None = None,
) -> list[tuple[TaskSpec, str | Harness, list[EpisodeResult]]]:
    """``collect``'s groups before they become trees: (task, harness, episodes) per group."""
    from clawgym_env._sync import LoopThread
    from trainers.rollout_stream import RolloutStream, local_executor

    loop = LoopThread()
    executor = local_executor(
        tasks, harnesses, backend, sandbox=sandbox, sampling=sampling, concurrency=concurrency, wall_time_s=wall_time_s
    )
    loop.run(executor.start())
    pairs = iter(sample_pairs(tasks, harnesses, weights, pairs_per_step, rng))
    stream = RolloutStream(executor, loop, num_generations=num_generations, next_pair=lambda: next(pairs))
    try:
        done, _ = stream.take(pairs_per_step)
    finally:
        stream.close()
        loop.run(executor.stop())
        loop.close()
    return [(*g.pair, list(g.episodes)) for g in done]


def _count_kinds(g: Group, out: dict[str, float]) -> None:
    """``calls_<kind>`` (as the classifier placed them, kept or not), ``foreign_calls[/<harness>]`` and
    ``dropped/<reason>`` (tree filters: ``dead``, ``kind:<kind>``) of one group, added to ``out``."""
    foreign = 0
    if g.tree is not None:
        for kinds in g.tree.kind_counts.values():
            for kind, n in kinds.items():
                out[f"calls_{kind}"] = out.get(f"calls_{kind}", 0.0) + n
        foreign = sum(g.tree.foreign_counts().values())
    out["foreign_calls"] = out.get("foreign_calls", 0.0) + foreign
    out[f"foreign_calls/{g.harness}"] = out.get(f"foreign_calls/{g.harness}", 0.0) + foreign
    for reason, items in g.dropped.items():
        if reason == "dead" or reason.startswith("kind:"):
            out[f"dropped/{reason}"] = out.get(f"dropped/{reason}", 0.0) + len(items)


def rollout_metrics(batch: RolloutBatch) -> dict[str, float]:
    """Reward and counts overall and per harness (``reward/<harness>`` etc.), calls by kind and what the tree
    filters left out (``_count_kinds``)."""
    out: dict[str, float] = {}
    by_harness: dict[str, list[float]] = defaultdict(list)
    for g in batch.all_groups:
        by_harness[g.harness].extend(g.rewards.values())
        out[f"calls/{g.harness}"] = out.get(f"calls/{g.harness}", 0.0) + g.calls
        out["generated_tokens"] = out.get("generated_tokens", 0.0) + g.generated_tokens
        for status, count in g.statuses.items():
            out[f"episodes_{status}/{g.harness}"] = out.get(f"episodes_{status}/{g.harness}", 0.0) + count
        masked = float(len(g.dropped.get("crashed", [])))
        out["crashed_masked"] = out.get("crashed_masked", 0.0) + masked
        out[f"crashed_masked/{g.harness}"] = out.get(f"crashed_masked/{g.harness}", 0.0) + masked
        _count_kinds(g, out)
    rewards = [r for rs in by_harness.values() for r in rs]
    out["reward"] = sum(rewards) / len(rewards) if rewards else 0.0
    for h, rs in by_harness.items():
        out[f"reward/{h}"] = sum(rs) / len(rs) if rs else 0.0
    lags = [batch.policy_version - v for g in batch.all_groups for v in g.versions]
    out["policy_lag/max"] = float(max(lags, default=0))
    out["groups_trained"] = float(len(batch.groups))
    out["groups_skipped"] = float(len(batch.skipped))
    out["frac_reward_zero_std"] = sum(g.zero_variance for g in batch.all_groups) / max(1, len(batch.all_groups))
    splits = [g.routing for g in batch.groups if g.routing is not None]
    if splits:
        for split in splits:
            for k, v in split.metrics().items():
                out[k] = out.get(k, 0.0) + v
        out["routing/shared_disagree"] = out["routing/disagreeing_tokens"] / max(1.0, out["routing/shared_tokens"])
    return out
