"""The local executor: ``concurrency`` lanes in this process pulling attempts from one queue."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym_env.errors import ConfigError

if TYPE_CHECKING:
    from clawgym_env.executors import JobQueue, OnDone, OnStart
    from clawgym_env.runner.config import AttemptJob, RunConfig, Worker, WorkerInfo

__all__ = ["LocalExecutor"]


class LocalExecutor:
    """Runs jobs through one worker, at most ``config.concurrency`` at once, in queue order.

    The first exception that is not an episode outcome (a bug, or the run being cancelled)
    cancels the other lanes and propagates.
    """

    def __init__(self, config: RunConfig, worker: Worker) -> None:
        self.config = config
        self.worker = worker
        self.lanes = config.concurrency

    async def start(self) -> WorkerInfo:
        return await self.worker.start()

    async def run(self, jobs: JobQueue, out_dir: Path, on_start: OnStart, on_done: OnDone) -> None:
        capture_dir = out_dir / "captures"

        async def lane() -> None:
            while (job := await jobs.get()) is not None:
                job = _with_session(job)
                ws = out_dir / "workspaces" / job.filename[:-5] if self.config.save_workspaces else None
                on_start(job)
                result = await self.worker.run(job, capture_dir, ws)
                await on_done(result)

        async with asyncio.TaskGroup() as tg:
            for _ in range(self.lanes):
                tg.create_task(lane())

    async def update_weights(self, state: Mapping[str, Any], version: int) -> None:
        from clawgym_env.runner.config import TrainableWorker

        if not isinstance(self.worker, TrainableWorker):
            raise ConfigError(f"worker {type(self.worker).__name__} cannot take new weights")
        await self.worker.update_weights(state, version)

    async def stop(self) -> None:
        await self.worker.stop()


def _with_session(job: AttemptJob) -> AttemptJob:
    """A fresh session id per try (a rerun after a kill gets a new one)."""
    return dataclasses.replace(job, session_id=job.session_id or uuid.uuid4().hex[:16])
