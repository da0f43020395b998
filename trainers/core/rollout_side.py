"""Where a trainer's episodes are sampled: the policy backend, the executor, the stream, the weight sync.

One object owns the rollout side of a run so the trainer only asks for a step's batch, pushes
weights after an update and closes it: the executor is the benchmark's (``--executor local``:
the trainer's in-process backend shared by ``max_concurrent_episodes`` lanes; ``--executor ray``:
one worker per node, each with its own backend built from the spec, sandboxes and proxy), the
groups come from a ``RolloutStream`` (``--async_rollouts``: ``max_staleness`` steps of groups sampled
ahead of the trainer), and
the weights move through the ``WeightSync`` the backend calls for. With ``rollout_cpus`` this side's
threads and processes start on those CPUs (``trainers.core.cpus``). An ``hf:`` policy captures tempered
logprobs (``log_softmax(logits / temperature)``, ``tempered_spec``): what the trainer compares them with.
"""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

import torch

from trainers.core.cpus import on_cpus
from trainers.core.weight_sync import ExecutorCopy, FixedPolicy, PolicyWeights, WeightSync, weight_sync_for
from trainers.rollout import RolloutBatch, StratifiedTasks, build_batch, group_staleness, harness_name, sample_pairs, tree_filters
from trainers.rollout_stream import RolloutStream, local_executor, rollout_config

if TYPE_CHECKING:
    from clawgym_env._sync import LoopThread
    from clawgym_env.episode import EpisodeResult
    from clawgym_env.executors import Executor
    from trainers.tree_grpo.config import TreeGRPOConfig

__all__ = ["TrainingRollouts", "tempered_spec"]


def tempered_spec(spec: str) -> str:
    """An ``hf:`` policy spec set to capture ``log_softmax(logits / temperature)`` (``logprobs_mode=tempered``).

    The trainer scores tokens at the sampling temperature, as TRL does, so the importance weights and the
    mismatch compare like with like (the same at temperature 1). Other specs are returned as given: a vLLM
    server sampling at a temperature other than 1 must run ``--logprobs-mode processed_logprobs``.
    """
    if not spec.startswith("hf:"):
        return spec
    target, _, query = spec.partition("?")
    options = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "logprobs_mode"]
    return f"{target}?{urlencode([*options, ('logprobs_mode', 'tempered')])}"


class TrainingRollouts:
    """Batches of groups for a trainer, sampled where ``config.executor`` says, in step or ahead of it."""

    def __init__(
        self,
        config: TreeGRPOConfig,
        model_path: Path,
        *,
        device: str,
        backend: Any | None = None,
        tasks: list[Any] | None = None,
        harness_adapters: dict[str, Any] | None = None,
        rng: random.Random,
    ) -> None:
        self.config = config
        self.model_path = model_path
        self.device = device
        self.rng = rng
        self._backend = backend
        self._tasks = tasks
        self._strata: StratifiedTasks | None = None
        self.harness_adapters = dict(harness_adapters or {})
        self._loop: LoopThread | None = None
        self._executor: Executor | None = None
        self._stream: RolloutStream | None = None
        self._sync: WeightSync | None = None
        self.staleness: Counter[int] = Counter()
        """Staleness (trainer version - oldest sampling version) of every group trained, over the run."""
        self.groups_stale = 0
        self._mark: tuple[float, float] | None = None
        self.cpus = config.cpu_sets()[1]
        """``rollout_cpus``: where this side's threads and processes are started (None: anywhere)."""
        if self.cpus is not None:  # spare launchers made before keep their maker's CPUs: the loop thread makes new ones
            from clawgym_env.sandbox import drop_spare_launchers

            drop_spare_launchers()

    # -- resources ------------------------------------------------------------------------------

    @property
    def backend(self) -> Any:
        """The policy backend of the local executor (created on first use; Ray workers build their own)."""
        if self._backend is None:
            with on_cpus(self.cpus):  # the child process (and its threads) start on the rollout CPUs
                self._backend = self._make_backend()
        return self._backend

    def _make_backend(self) -> Any:
        c = self.config
        if c.rollout_process:
            from trainers.core.rollout_process import ChildHFBackend

            return ChildHFBackend(tempered_spec(c.rollout_backend or f"hf:{self.model_path}?seed={c.seed}"), self.model_path)
        if c.rollout_backend:
            from clawgym_env.proxy.backends.factory import backend_from_spec

            return backend_from_spec(tempered_spec(c.rollout_backend), tokenizer_path=self.model_path, option="--rollout_backend")
        from clawgym_env.proxy.backends.hf import HFBackend

        # every episode in flight decodes in one batch (their shared prompt held once: the backend's trunk)
        return HFBackend(
            self.model_path, device=self.device, seed=c.seed, logprobs_mode="tempered", max_batch=max(1, c.max_concurrent_episodes)
        )

    @property
    def tasks(self) -> list[Any]:
        """The tasks to sample from: ``config.suite`` narrowed to ``config.tasks``."""
        if self._tasks is None:
            from clawgym_env.task import load_suite

            suite = load_suite(self.config.suite)
            ids = self.config.task_ids
            self._tasks = [suite.get(t) for t in ids] if ids else list(suite.tasks)
        return self._tasks

    @property
    def harnesses(self) -> list[Any]:
        return [self.harness_adapters.get(n, n) for n in self.config.harness_names]

    @property
    def loop(self) -> LoopThread:
        if self._loop is None:
            from clawgym_env._sync import LoopThread

            with on_cpus(self.cpus):  # the loop thread, and the sandboxes, harnesses and threads it starts
                self._loop = LoopThread()
        return self._loop

    def _sampling(self) -> dict[str, Any]:
        c = self.config
        return {"max_tokens": c.max_completion_length, "temperature": c.temperature, "top_p": c.top_p}

    def _start(self, tasks: list[Any]) -> Executor:
        c = self.config
        kw: dict[str, Any] = {
            "sampling": self._sampling(),
            "sandbox": c.sandbox,
            "concurrency": c.max_concurrent_episodes,
            "wall_time_s": c.episode_wall_time_s,
        }
        if c.executor == "ray":
            from clawgym_env.executors.ray_executor import RayExecutor

            spec = tempered_spec(c.rollout_backend or f"hf:{self.model_path}")
            executor: Executor = RayExecutor(
                rollout_config(self.harnesses, suite=c.suite, model=spec, executor="ray", ray_address=c.ray_address, **kw)
            )
        else:
            executor = local_executor(tasks, self.harnesses, self.backend, **kw)
        self.loop.run(executor.start())
        return executor

    def stream(self) -> RolloutStream:
        """The training stream (executor started on first use)."""
        if self._stream is None:
            c = self.config
            self._executor = self._start(self.tasks + self._eval_tasks())
            # K steps of groups beyond the one being taken: lanes freed by a step's early finishers start the
            # next steps' groups instead of idling on its slowest episode, and a group requested at version v
            # is taken by version v + K at the latest (finishing in request order), within the bound.
            lookahead = c.pairs_per_step * c.max_staleness if c.async_rollouts else 0
            self._stream = RolloutStream(
                self._executor,
                self.loop,
                num_generations=int(c.num_generations or 2),
                next_pair=self._next_pair,
                lookahead=lookahead,
                rng=self.rng,
            )
            self._mark = (time.monotonic(), 0.0)
        return self._stream

    def _next_pair(self) -> tuple[Any, Any]:
        c = self.config
        if c.task_sampling == "stratified" and self._strata is None:
            self._strata = StratifiedTasks(self.tasks)
        return sample_pairs(self.tasks, self.harnesses, c.harness_weights, 1, self.rng, self._strata)[0]

    # -- weights --------------------------------------------------------------------------------

    def push(self, weights: PolicyWeights, version: int) -> None:
        """Give the rollout side the policy's weights; later captures carry ``version``.

        Before anything samples there is nothing to push to; the push happens when it starts
        (``ready``) if the trainer is past version 0 (a resumed run).
        """
        if self._sync is None:
            if self._backend is None and self._executor is None:
                return
            self._sync = self._make_sync()
        self._sync.push(weights, version)

    def _make_sync(self) -> WeightSync:
        c = self.config
        if c.executor == "ray":
            assert self._executor is not None
            return FixedPolicy() if (c.rollout_backend or "").startswith("scripted:") else ExecutorCopy(self._executor, self.loop)
        return weight_sync_for(
            self.backend,
            folder=Path(c.output_dir) / "policy-latest",  # type: ignore[arg-type]  # TrainingArguments always sets output_dir
            loop=self.loop,
            broadcast=c.weight_sync == "broadcast",
            device=torch.device(self.device),
        )

    # -- batches --------------------------------------------------------------------------------

    def next_batch(self, policy_version: int, weights: PolicyWeights) -> RolloutBatch:
        """``pairs_per_step`` groups no staler than ``max_staleness``, as a batch; staleness and idle-time metrics."""
        c = self.config
        fresh = self._stream is None
        stream = self.stream()
        if fresh and policy_version:
            self.push(weights, policy_version)  # a resumed run: the rollout side starts at the trainer's version
        if c.branching:
            groups, refused = self._branched_groups(stream), 0
        else:
            done, refused = stream.take(c.pairs_per_step, keep=lambda g: group_staleness(g.episodes, policy_version) <= c.max_staleness)
            self.groups_stale += refused
            done.sort(key=lambda g: g.gid)  # request order, not finish order: a seeded run sums its loss in the same order
            groups = [(*g.pair, g.episodes) for g in done]
        filters = tree_filters(drop_retries=c.drop_retries, max_leaves=c.max_leaves, exclude_subagents=c.exclude_subagents)
        batch = build_batch(
            groups,
            filters=filters,
            policy_version=policy_version,
            skip_zero_variance=c.drop_zero_variance_from_loss,
            crashed=c.crashed_episodes,  # type: ignore[arg-type]  # checked by the config
            crashed_reward=c.crashed_reward,
        )
        lags = [group_staleness(eps, policy_version) for _, _, eps in groups]
        self.staleness.update(lags)
        batch.metrics.update(
            {"groups_stale": float(refused), "staleness/mean": sum(lags) / max(1, len(lags)), "rollout_idle_share": self.idle_share()}
        )
        return batch

    def _branched_groups(self, stream: RolloutStream) -> list[tuple[Any, Any, list[EpisodeResult]]]:
        """``pairs_per_step`` groups sampled as trees (``trainers.branching``): roots, then branches of them."""
        from trainers.branching import sample_branched_groups

        c = self.config
        pairs = [self._next_pair() for _ in range(c.pairs_per_step)]
        eps = sample_branched_groups(
            stream,
            pairs,
            roots=int(c.num_generations or 1),
            points=c.branch_points,
            per_point=c.branches_per_point,
            mode=c.branch_strategy,  # type: ignore[arg-type]  # checked by the config
            rng=self.rng,
            workdir=stream.out_dir / "branch-roots",
        )
        return [(*pair, group) for pair, group in zip(pairs, eps, strict=True)]

    def idle_share(self) -> float:
        """Share of lane time since the last call that no attempt was running (1.0: the workers sat idle)."""
        if self._stream is None or self._mark is None or self._executor is None:
            return 0.0
        now, busy = time.monotonic(), self._stream.busy_seconds()
        t, b = self._mark
        self._mark = (now, busy)
        span = (now - t) * self._executor.lanes
        return max(0.0, 1.0 - (busy - b) / span) if span > 0 else 0.0

    def _eval_tasks(self) -> list[Any]:
        c = self.config
        if not c.eval_suite:
            return []
        from clawgym_env.task import load_suite

        suite = load_suite(str(c.eval_suite))
        return [suite.get(t) for t in c.eval_task_ids] if c.eval_task_ids else list(suite.tasks)

    def evaluate(self, episodes: int) -> dict[str, list[float]]:
        """Scores per harness of ``episodes`` runs of every (eval task, harness) pair, through the same executor."""
        pairs = [(t, h) for t in self._eval_tasks() for h in self.harnesses]
        scores: dict[str, list[float]] = defaultdict(list)
        for (_, h), eps in zip(pairs, self.stream().run_now(pairs, episodes), strict=True):
            scores[harness_name(h)].extend(e.score for e in eps)
        return scores

    def close(self) -> None:
        """Stop the stream and the executor, close the backend this object created (idempotent)."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._executor is not None:
            self.loop.run(self._executor.stop())
            self._executor = None
        if self._backend is not None:
            self.loop.run(self._backend.aclose())
        if self._loop is not None:
            self._loop.close()
            self._loop = None
