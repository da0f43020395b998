"""The local executor: a fixed pool of ``concurrency`` tasks pulling attempts from one queue."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from clawgym_env.results import AttemptResult

if TYPE_CHECKING:
    from clawgym_env.runner import AttemptJob, RunConfig, Worker

__all__ = ["run_local"]


async def run_local(
    config: RunConfig,
    out_dir: Path,
    jobs: list[AttemptJob],
    on_start: Callable[[AttemptJob], None],
    on_done: Callable[[AttemptResult], Awaitable[None]],
    worker: Worker,
) -> None:
    """Run ``jobs`` through ``worker``, at most ``config.concurrency`` at once, in plan order.

    Captures go straight to ``out_dir/captures``; the first exception that is not an episode
    outcome (a bug, or the run being cancelled) cancels the rest and propagates.
    """
    queue: asyncio.Queue[AttemptJob] = asyncio.Queue()
    for j in jobs:
        queue.put_nowait(j)
    capture_dir = out_dir / "captures"

    async def lane() -> None:
        while True:
            try:
                job = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            job = dataclasses.replace(job, session_id=job.session_id or uuid.uuid4().hex[:16])
            ws = out_dir / "workspaces" / job.filename[:-5] if config.save_workspaces else None
            on_start(job)
            result = await worker.run(job, capture_dir, ws)
            await on_done(result)

    async with asyncio.TaskGroup() as tg:
        for _ in range(min(config.concurrency, len(jobs))):
            tg.create_task(lane())
