"""The Ray executor: one actor per node runs episodes there (its own sandboxes and proxy).

The driver hands attempts to the actors, ``concurrency`` in flight per actor, and gathers each
AttemptResult with its capture (and workspace) into the same results folder as the local
executor; only the driver writes it. An actor that dies hands its attempt back to the queue.
Ray is an optional extra: ``pip install "ray[default]"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import os
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym_env.errors import ConfigError, RunError
from clawgym_env.results import AttemptResult

if TYPE_CHECKING:
    from clawgym_env.executors import JobQueue, OnDone, OnStart
    from clawgym_env.runner.config import AttemptJob, RunConfig, WorkerInfo

__all__ = ["NodeWorker", "RayExecutor"]


class NodeWorker:
    """Body of the per-node Ray actor: a worker plus a node-local folder for its captures."""

    def __init__(self, config: dict[str, Any]) -> None:
        from clawgym_env.runner.config import RunConfig, import_object

        self.config = RunConfig.from_dict(config)
        self.worker = import_object(self.config.worker)(self.config)
        self.tmp = Path(tempfile.mkdtemp(prefix="clawgym-ray-"))
        (self.tmp / "captures").mkdir()

    async def start(self) -> WorkerInfo:
        return await self.worker.start()

    async def run(self, job: AttemptJob) -> tuple[str, bytes | None, bytes | None]:
        """Run one attempt here; return its record (JSON), capture bytes and workspace tarball."""
        ws = self.tmp / "workspaces" / job.filename[:-5] if self.config.save_workspaces else None
        result = await self.worker.run(job, self.tmp / "captures", ws)
        cap_path = self.tmp / "captures" / f"{result.session_id}.jsonl"
        capture = cap_path.read_bytes() if cap_path.is_file() else None
        cap_path.unlink(missing_ok=True)
        tarball = None
        if ws is not None and ws.is_dir():
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                tar.add(ws, arcname=".")
            tarball = buf.getvalue()
            shutil.rmtree(ws, ignore_errors=True)
        return result.model_dump_json(), capture, tarball

    async def update_weights(self, state: Any, version: int) -> None:
        """New policy weights for this node's worker (a Ray object ref arrives resolved)."""
        from clawgym_env.runner.config import TrainableWorker

        if not isinstance(self.worker, TrainableWorker):
            raise ConfigError(f"worker {type(self.worker).__name__} cannot take new weights")
        await self.worker.update_weights(state, version)

    async def stop(self) -> None:
        try:
            await self.worker.stop()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{uuid.uuid4().hex}-{path.name}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _alive_nodes(ray: Any) -> list[str]:
    return [n["NodeID"] for n in ray.nodes() if n.get("Alive")]


class RayExecutor:
    """Actors on every alive node of the cluster (``config.ray_address``, or the one this process joined)."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.actors: list[Any] = []
        self.lanes = 0
        self._owned = False
        self._ray: Any = None

    async def start(self) -> WorkerInfo:
        try:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        except ImportError as exc:
            raise ConfigError('--executor ray needs Ray: pip install "ray[default]"') from exc
        self._ray = ray
        config = self.config
        self._owned = not ray.is_initialized()
        if self._owned:
            try:
                ray.init(address=config.ray_address, log_to_driver=False)
            except ConnectionError as exc:  # --ray-address auto (or a host:port) with no cluster there
                raise RunError(
                    f"--ray-address {config.ray_address}: no Ray cluster found ({str(exc).splitlines()[0]}). "
                    "Fix: start one with `ray start --head`, or drop --ray-address to start a local one"
                ) from None
        actor_cls: Any = ray.remote(num_cpus=0)(NodeWorker)
        self.actors = [
            actor_cls.options(
                max_concurrency=config.concurrency + 2, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False)
            ).remote(config.to_dict())
            for node in _alive_nodes(ray)
        ]
        if not self.actors:
            raise RunError("the Ray cluster has no alive node; check `ray status`")
        self.lanes = config.concurrency * len(self.actors)
        infos = await asyncio.gather(*(a.start.remote() for a in self.actors))
        return infos[0]

    async def run(self, jobs: JobQueue, out_dir: Path, on_start: OnStart, on_done: OnDone) -> None:
        ray = self._ray
        dead: set[int] = set()

        async def lane(i: int) -> None:
            while i not in dead and (job := await jobs.get()) is not None:
                job = dataclasses.replace(job, session_id=job.session_id or uuid.uuid4().hex[:16])
                on_start(job)
                try:
                    record, capture, tarball = await self.actors[i].run.remote(job)
                except ray.exceptions.RayActorError:
                    dead.add(i)
                    jobs.requeue(dataclasses.replace(job, session_id=""))
                    return
                result = AttemptResult.model_validate_json(record)
                if capture is not None:
                    _write_atomic(out_dir / "captures" / f"{result.session_id}.jsonl", capture)
                if tarball is not None:
                    dest = out_dir / "workspaces" / job.filename[:-5]
                    shutil.rmtree(dest, ignore_errors=True)
                    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
                        tar.extractall(dest, filter="data")
                await on_done(result)

        async with asyncio.TaskGroup() as tg:
            for i in range(len(self.actors)):
                for _ in range(self.config.concurrency):
                    tg.create_task(lane(i))
        if jobs.pending():
            raise RunError(f"every Ray actor died; {jobs.pending()} attempts left: `clawgym bench resume {out_dir}`")

    async def update_weights(self, state: Mapping[str, Any], version: int) -> None:
        ref = self._ray.put({k: v.detach().cpu() for k, v in state.items()})  # one copy in the object store
        await asyncio.gather(*(a.update_weights.remote(ref, version) for a in self.actors))

    async def stop(self) -> None:
        for a in self.actors:
            with contextlib.suppress(Exception):
                await a.stop.remote()
            self._ray.kill(a)
        self.actors = []
        if self._owned:
            self._ray.shutdown()
            self._owned = False
