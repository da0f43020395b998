"""Executors fan attempts out: ``local`` (one process) and ``ray`` (one actor per node).

Both run the same worker and hand each finished AttemptResult to the caller, which alone writes
the results folder, so the two produce folders of identical form. ``clawgym bench run`` and the
trainers' rollouts go through the same two classes: an executor is started once, runs any number
of job streams (:class:`JobQueue`), and takes new policy weights between or during them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from clawgym_env.errors import ConfigError

if TYPE_CHECKING:
    from clawgym_env.results import AttemptResult
    from clawgym_env.runner.config import AttemptJob, RunConfig, WorkerInfo

__all__ = ["Executor", "JobQueue", "OnDone", "OnStart", "make_executor"]

OnStart = Callable[["AttemptJob"], None]
OnDone = Callable[["AttemptResult"], Awaitable[None]]


class JobQueue:
    """Attempts to run, fed while an executor runs them; ``close()`` lets the lanes finish."""

    def __init__(self, jobs: Iterable[AttemptJob] = (), *, closed: bool = False) -> None:
        self._queue: asyncio.Queue[AttemptJob | None] = asyncio.Queue()
        self._closed = False
        for j in jobs:
            self.put(j)
        if closed:
            self.close()

    def put(self, job: AttemptJob) -> None:
        if self._closed:
            raise RuntimeError("JobQueue is closed")
        self._queue.put_nowait(job)

    def requeue(self, job: AttemptJob) -> None:
        """Hand back a job whose lane died (allowed after close)."""
        self._queue.put_nowait(job)

    def close(self) -> None:
        """No more jobs: every lane returns once the queue is drained."""
        if not self._closed:
            self._closed = True
            self._queue.put_nowait(None)

    @property
    def closed(self) -> bool:
        return self._closed

    def pending(self) -> int:
        return len([j for j in self._queue._queue if j is not None])  # type: ignore[attr-defined]  # asyncio.Queue's deque

    async def get(self) -> AttemptJob | None:
        """The next job, waiting while the queue is open and empty; None once closed and drained."""
        job = await self._queue.get()
        if job is None:
            self._queue.put_nowait(None)  # wake the next lane too
        return job


class Executor(Protocol):
    """Runs attempts on workers it owns; started once, used for any number of job streams."""

    lanes: int
    """Attempts in flight at most (``concurrency`` per worker x workers)."""

    async def start(self) -> WorkerInfo: ...

    async def run(self, jobs: JobQueue, out_dir: Path, on_start: OnStart, on_done: OnDone) -> None:
        """Run jobs until ``jobs`` is closed and drained; captures land in ``out_dir/captures``."""
        ...

    async def update_weights(self, state: Mapping[str, Any], version: int) -> None:
        """Give every worker's policy backend new weights; later calls carry ``version``."""
        ...

    async def stop(self) -> None: ...


def make_executor(config: RunConfig, worker: Any | None = None) -> Executor:
    """The executor ``config.executor`` names; ``worker`` (local only) replaces the configured worker."""
    if config.executor == "ray":
        if worker is not None:
            raise ConfigError(
                "--executor ray builds a worker on every node; it cannot take an in-process worker "
                "(an in-process backend or harness instance): use registry names and a backend spec"
            )
        from clawgym_env.executors.ray_executor import RayExecutor

        return RayExecutor(config)
    from clawgym_env.executors.local import LocalExecutor
    from clawgym_env.runner.config import import_object

    return LocalExecutor(config, worker if worker is not None else import_object(config.worker)(config))
