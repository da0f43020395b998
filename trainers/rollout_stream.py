"""Training rollouts through the benchmark's executor: groups of episodes, on demand or ahead.

A ``RolloutStream`` owns one long-running ``executor.run`` (local lanes or Ray actors, exactly
as ``clawgym bench run``) fed by a ``JobQueue``. A group is ``n`` attempts of one (task, harness)
pair; when its last attempt finishes, its captures are read back into ``EpisodeResult``s and the
group is ready. Synchronous training asks for a step's groups and waits (``lookahead=0``);
asynchronous training keeps ``lookahead`` more groups in flight, so the workers keep sampling
with the newest weights they have while the trainer steps. What to sample is the caller's
(``next_pair``): the stream only runs groups and measures how busy its lanes were.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import random
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym_env.errors import RunError

if TYPE_CHECKING:
    from clawgym_env._sync import LoopThread
    from clawgym_env.episode import EpisodeResult
    from clawgym_env.executors import Executor, JobQueue
    from clawgym_env.results import AttemptResult
    from clawgym_env.runner import AttemptJob

__all__ = ["GroupResult", "RolloutStream", "episode_from_attempt"]

_STATUS = {"passed": "completed", "failed": "completed"}


def episode_from_attempt(result: AttemptResult, capture: Path) -> EpisodeResult:
    """The trainer's view of a finished attempt: its status, score and captured calls."""
    from clawgym_env.capture.store import read_capture
    from clawgym_env.episode import EpisodeResult

    calls = read_capture(capture) if capture.is_file() else []
    return EpisodeResult(
        session_id=result.session_id,
        task_id=result.task_id,
        harness=result.harness,
        status=result.episode_status or _STATUS.get(result.status, result.status),  # type: ignore[arg-type]  # an episode status string
        score=result.score,
        error=result.error,
        calls=calls,
        timings=dict(result.timings),
        limit_hit=result.limit_hit,
    )


@dataclass
class GroupResult:
    """One finished group: the pair it sampled and its episodes, in attempt order."""

    gid: int
    pair: tuple[Any, Any]
    episodes: list[EpisodeResult]
    requested_at: float
    finished_at: float = 0.0


@dataclass
class _Pending:
    pair: tuple[Any, Any]
    n: int
    requested_at: float
    results: dict[int, EpisodeResult] = field(default_factory=dict)


class RolloutStream:
    """Groups sampled through ``executor`` on ``loop``; ``take`` blocks the trainer's thread only."""

    def __init__(
        self,
        executor: Executor,
        loop: LoopThread,
        *,
        num_generations: int,
        next_pair: Callable[[], tuple[Any, Any]],
        lookahead: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        self.executor = executor
        self.rng = rng
        """Draws each attempt's session id (which seeds its sampling, ``HFBackend``): a seeded run replays."""
        self.loop = loop
        self.n = num_generations
        self.next_pair = next_pair
        self.lookahead = lookahead
        self._tmp = tempfile.TemporaryDirectory(prefix="clawgym-rollouts-")
        self.out_dir = Path(self._tmp.name)
        (self.out_dir / "captures").mkdir()
        self._jobs: JobQueue | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: dict[int, _Pending] = {}
        self._ready: queue.Queue[GroupResult | BaseException] = queue.Queue()
        self._side: dict[int, GroupResult] = {}  # finished groups someone asked for by id (eval)
        self._side_ids: set[int] = set()
        self._lock = threading.Lock()
        self._next_gid = 0
        self._attempts: dict[int, tuple[int, int]] = {}  # attempt number -> (group id, index in group), while running
        self._next_attempt = 0  # never reused: a number freed by a finished attempt may not name a new one
        self._in_flight = 0  # training groups requested and not yet taken
        self._started: dict[str, float] = {}
        self._busy = 0.0
        self.t0 = time.monotonic()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        from clawgym_env.executors import JobQueue

        async def launch() -> tuple[JobQueue, asyncio.Task[None]]:
            jobs = JobQueue()
            task = asyncio.ensure_future(self.executor.run(jobs, self.out_dir, self._on_start, self._on_done))
            task.add_done_callback(self._run_ended)
            return jobs, task

        self._jobs, self._task = self.loop.run(launch())
        self.t0 = time.monotonic()

    def close(self) -> None:
        """Stop sampling: groups still in flight are cancelled (their sandboxes closed)."""
        if self._task is None:
            self._tmp.cleanup()
            return
        task, jobs = self._task, self._jobs
        assert jobs is not None

        async def stop() -> None:
            jobs.close()
            if self._pending:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

        self.loop.run(stop(), timeout=300)
        self._task = None
        self._tmp.cleanup()

    # -- requesting and taking groups -------------------------------------------------------------

    def request(
        self,
        pairs: Sequence[tuple[Any, Any]],
        n: int | None = None,
        *,
        side: bool = False,
        replays: Sequence[tuple[str, int]] | None = None,
    ) -> list[int]:
        """Queue one group of ``n`` attempts per pair; returns their ids.

        ``replays``: attempt i of each group branches the capture ``replays[i][0]`` at call
        ``replays[i][1]`` (see ``trainers.branching``); ``n`` defaults to its length then.
        """
        from clawgym_env.runner import AttemptJob
        from trainers.rollout import harness_name

        if self._jobs is None:
            self.start()
        n = n or (len(replays) if replays else self.n)
        if replays is not None and len(replays) != n:
            raise RunError(f"RolloutStream.request: {len(replays)} replays for groups of {n} attempts; give one per attempt")
        gids = []
        jobs: list[AttemptJob] = []
        with self._lock:
            for pair in pairs:
                gid = self._next_gid
                self._next_gid += 1
                self._pending[gid] = _Pending(pair, n, time.monotonic())
                if side:
                    self._side_ids.add(gid)
                else:
                    self._in_flight += 1
                gids.append(gid)
                task, harness = pair
                for i in range(n):
                    attempt = self._next_attempt
                    self._next_attempt += 1
                    self._attempts[attempt] = (gid, i)
                    sid = f"{harness_name(harness)}-{self.rng.getrandbits(64):016x}" if self.rng is not None else ""
                    replay, k = replays[i] if replays else ("", 0)
                    jobs.append(
                        AttemptJob(
                            task_id=task.full_id, harness=harness_name(harness), attempt=attempt, session_id=sid, replay=replay, branch_at=k
                        )
                    )
        for job in jobs:
            self.loop.loop.call_soon_threadsafe(self._put, job)
        return gids

    def _put(self, job: AttemptJob) -> None:
        assert self._jobs is not None
        self._jobs.put(job)

    def take(self, k: int, keep: Callable[[GroupResult], bool] = lambda g: True) -> tuple[list[GroupResult], int]:
        """``k`` finished groups that ``keep`` accepts (oldest first), and how many it refused.

        A refused group (too stale) is replaced by a fresh request. Before returning, enough
        groups are requested to keep ``lookahead`` in flight while the caller trains.
        """
        self._top_up(k)
        out: list[GroupResult] = []
        refused = 0
        while len(out) < k:
            item = self._ready.get()
            if isinstance(item, BaseException):
                raise item
            with self._lock:
                self._in_flight -= 1
            if keep(item):
                out.append(item)
            else:
                refused += 1
                self._top_up(k - len(out))
        self._top_up(self.lookahead)
        return out, refused

    def run_now(
        self, pairs: Sequence[tuple[Any, Any]], n: int | None = None, *, replays: Sequence[tuple[str, int]] | None = None
    ) -> list[list[EpisodeResult]]:
        """Run one group per pair beside the training stream (evaluation, branches) and wait for all of them."""
        return self.wait(self.request(pairs, n, side=True, replays=replays))

    def wait(self, gids: Sequence[int]) -> list[list[EpisodeResult]]:
        """The episodes of the side groups ``gids`` (``request(..., side=True)``), once all have finished."""
        out = []
        for gid in gids:
            while gid not in self._side:
                if self._task is not None and self._task.done() and not self._task.cancelled():
                    self._task.result()
                time.sleep(0.05)
            out.append(self._side.pop(gid).episodes)
        return out

    def _top_up(self, want: int) -> None:
        with self._lock:
            missing = want - self._in_flight
        if missing > 0:
            self.request([self.next_pair() for _ in range(missing)])

    # -- executor callbacks (on the loop) ---------------------------------------------------------

    def _on_start(self, job: AttemptJob) -> None:
        self._started[job.session_id] = time.monotonic()

    async def _on_done(self, result: AttemptResult) -> None:
        now = time.monotonic()
        started = self._started.pop(result.session_id, None)
        if started is not None:
            self._busy += now - started
        capture = self.out_dir / "captures" / f"{result.session_id}.jsonl"
        episode = episode_from_attempt(result, capture)
        capture.unlink(missing_ok=True)
        with self._lock:
            gid, i = self._attempts.pop(result.attempt)
            pend = self._pending[gid]
            pend.results[i] = episode
            if len(pend.results) < pend.n:
                return
            del self._pending[gid]
            done = GroupResult(gid, pend.pair, [pend.results[j] for j in range(pend.n)], pend.requested_at, now)
            if gid in self._side_ids:
                self._side_ids.discard(gid)
                self._side[gid] = done
                return
        self._ready.put(done)

    def _run_ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        self._ready.put(exc if exc is not None else RunError("the rollout executor stopped while groups were pending"))

    # -- measurements -----------------------------------------------------------------------------

    def busy_seconds(self) -> float:
        """Seconds of attempt time so far, summed over lanes (attempts still running count so far)."""
        now = time.monotonic()
        return self._busy + sum(now - s for s in list(self._started.values()))


def rollout_config(
    harnesses: Sequence[Any],
    *,
    sampling: dict[str, Any] | None,
    sandbox: str,
    concurrency: int,
    wall_time_s: float | None,
    suite: str = "",
    model: str = "in-process",
    executor: str = "local",
    ray_address: str | None = None,
) -> Any:
    """The ``RunConfig`` a training rollout runs under (what ``bench run`` would be given)."""
    from clawgym_env.runner import RunConfig
    from trainers.rollout import harness_name

    s = sampling or {}
    return RunConfig(
        model=model,
        harnesses=[harness_name(h) for h in harnesses],
        suite=suite,
        concurrency=concurrency,
        sandbox=sandbox,
        executor=executor,
        ray_address=ray_address,
        max_tokens=s.get("max_tokens"),
        temperature=s.get("temperature"),
        top_p=s.get("top_p"),
        wall_time_s=wall_time_s,
    )


def local_executor(tasks: Sequence[Any], harnesses: Sequence[Any], backend: Any, **kw: Any) -> Executor:
    """The local executor over ``backend`` in this process, for these tasks and harness adapters."""
    from clawgym_env.executors.local import LocalExecutor
    from clawgym_env.runner import EpisodeWorker
    from trainers.rollout import harness_name

    config = rollout_config(harnesses, **kw)
    adapters = {harness_name(h): h for h in harnesses if not isinstance(h, str)}
    return LocalExecutor(config, EpisodeWorker(config, backend=backend, tasks=list(tasks), harnesses=adapters))
