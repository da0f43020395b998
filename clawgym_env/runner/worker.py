"""The real worker: runs episodes with ``run_episode`` and turns each into a stored AttemptResult."""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym_env.errors import ClawGymError, ConfigError
from clawgym_env.results import AttemptResult
from clawgym_env.runner.config import AttemptJob, RunConfig, SuiteInfo, TaskInfo, WorkerInfo

if TYPE_CHECKING:
    from clawgym_env.harness import Harness
    from clawgym_env.proxy import ProxyServer
    from clawgym_env.proxy.backends.base import PolicyBackend
    from clawgym_env.task import Suite, TaskSpec

log = logging.getLogger("clawgym.runner")


class EpisodeWorker:
    """Runs real episodes: suite from ``load_suite``, backend from ``backend_from_spec``, one proxy
    for every episode of this process, harness adapters from the registry."""

    def __init__(
        self,
        config: RunConfig,
        *,
        backend: PolicyBackend | None = None,
        tasks: list[TaskSpec] | None = None,
        harnesses: Mapping[str, Harness] | None = None,
    ) -> None:
        """``backend``, ``tasks`` and ``harnesses`` (name -> adapter) given here are used instead of
        building them from the config (a trainer's in-process policy); the caller closes ``backend``."""
        self.config = config
        self._given = (backend, tasks, dict(harnesses or {}))
        self._tasks: dict[str, TaskSpec] = {}
        self._harnesses: dict[str, Harness] = {}
        self._backend: PolicyBackend | None = None
        self._judge: PolicyBackend | None = None
        self._proxy: ProxyServer | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._pass_threshold = 1.0

    @staticmethod
    def _load_suite(config: RunConfig) -> tuple[Suite, list[TaskSpec]]:
        from clawgym_env.task import load_suite

        suite = load_suite(config.suite)
        return suite, (suite.select(config.tasks.split(",")) if config.tasks else list(suite.tasks))

    @classmethod
    def describe_suite(cls, config: RunConfig) -> SuiteInfo:
        suite, tasks = cls._load_suite(config)
        rubric = [t.full_id for t in tasks if any(v.kind == "rubric" for v in t.verifiers)]
        warnings = []
        if rubric and not config.judge:
            warnings.append(
                f"{len(rubric)} task(s) have rubric verifiers (e.g. {rubric[0]}) but no --judge was given: "
                "their rubric items will score 0. Pass --judge SPEC (e.g. openai:URL#MODEL)."
            )
        return SuiteInfo(
            name=suite.name,
            content_hash=suite.content_hash,
            pass_threshold=float(suite.pass_threshold),
            tasks=[TaskInfo(t.full_id, t.category, t.difficulty) for t in tasks],
            warnings=warnings,
        )

    async def start(self) -> WorkerInfo:
        from clawgym_env.harness_install import cache_root
        from clawgym_env.harness_registry import load_harness
        from clawgym_env.proxy import ProxyServer
        from clawgym_env.proxy.backends.factory import backend_from_spec
        from clawgym_env.sandbox._sweep import tagged_tempdir

        backend, given_tasks, given_harnesses = self._given
        if given_tasks is None:
            suite, given_tasks = self._load_suite(self.config)
            self._pass_threshold = float(suite.pass_threshold)
        self._tasks = {t.full_id: t for t in given_tasks}
        self._harnesses = {n: given_harnesses.get(n) or load_harness(n) for n in self.config.harnesses}
        for h in self._harnesses.values():  # not installed: one error now, not an error record per attempt
            h.mounts(cache_root())
        self._backend = model = backend if backend is not None else backend_from_spec(self.config.model)
        if self.config.judge:
            self._judge = backend_from_spec(self.config.judge, option="--judge")
        self._tmp = tagged_tempdir("run")  # tagged: the next run removes it should this one be killed
        self._proxy = ProxyServer(host="127.0.0.1", port=0, uds_path=Path(self._tmp.name) / "proxy.sock")
        await self._proxy.start()
        return WorkerInfo(
            harnesses={n: h.version for n, h in self._harnesses.items()},
            model_info={"name": model.model_name, "backend": type(model).__name__, "token_level": model.TOKEN_LEVEL},
            evaluation_only=not model.TOKEN_LEVEL,
        )

    async def run(self, job: AttemptJob, capture_dir: Path, workspace_dir: Path | None) -> AttemptResult:
        from clawgym_env.episode import run_episode

        task = self._tasks[job.task_id]
        started = _now()
        t0 = time.monotonic()
        limit = float(self.config.wall_time_s or task.limits.wall_time_s)
        backend = self._backend
        if backend is None:
            raise ConfigError("EpisodeWorker.run before start(): start the worker first")
        if job.replay:
            from clawgym_env.proxy.backends.replay import ReplayBackend
            from clawgym_env.tree.build import load_calls

            try:
                backend = ReplayBackend(load_calls(job.replay), job.branch_at, backend)
            except ClawGymError as exc:
                return _error_result(job, "error", f"{type(exc).__name__}: {exc}", started, t0)
        try:
            ep = await asyncio.wait_for(
                run_episode(
                    task,
                    self._harnesses[job.harness],
                    backend,
                    proxy=self._proxy,
                    sandbox=self.config.sandbox,
                    capture_dir=capture_dir,
                    workspace_out=workspace_dir,
                    judge=self._judge,
                    sampling=self.config.attempt_sampling(job.task_id, job.harness, job.attempt) or None,
                    wall_time_s=self.config.wall_time_s,
                    session_id=job.session_id or None,
                ),
                timeout=limit + 120.0,  # run_episode enforces the task's limit; this only guards a hang
            )
        except TimeoutError:
            return _error_result(job, "timeout", f"episode did not return within {limit + 120:.0f}s", started, t0)
        except ClawGymError as exc:  # a sandbox or harness failure is a recorded outcome
            return _error_result(job, "error", f"{type(exc).__name__}: {exc}", started, t0)
        except Exception as exc:  # a fault in the proxy, a backend or our code: this attempt's error, not a lost run
            log.exception("attempt %s/%s/%d failed inside the worker", job.task_id, job.harness, job.attempt)
            return _error_result(job, "error", f"internal error, {type(exc).__name__}: {exc}", started, t0)
        return episode_to_attempt(job, ep, self._pass_threshold, started=started, elapsed=time.monotonic() - t0)

    async def update_weights(self, state: Mapping[str, Any], version: int) -> None:
        from clawgym_env.proxy.backends.hf import HFBackend

        if not isinstance(self._backend, HFBackend):
            raise ConfigError(f"policy {self.config.model!r} cannot take new weights in a worker; train with an hf: policy")
        await asyncio.to_thread(self._backend.update_weights, state, version)

    async def stop(self) -> None:
        if self._proxy is not None:
            await self._proxy.stop()
            self._proxy = None
        for b in (self._backend if self._given[0] is None else None, self._judge):
            if b is not None:
                await b.aclose()
        self._backend = self._judge = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _error_result(job: AttemptJob, status: str, error: str, started: str, t0: float) -> AttemptResult:
    return AttemptResult(
        task_id=job.task_id,
        harness=job.harness,
        attempt=job.attempt,
        category=job.category,
        status=status,  # type: ignore[arg-type]  # one of AttemptStatus, mapped above
        score=0.0,
        error=error,
        session_id=job.session_id,
        timings={"total": time.monotonic() - t0},
        started_at=started,
        finished_at=_now(),
    )


def _utf8(text: str) -> str:
    """``text`` with any lone surrogate written out (``\\udcff``): file names an agent made are decoded
    with surrogateescape, and one in a note made the record unwritable, which stopped the whole run."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_STATUS = {"completed": None, "truncated": "truncated", "timeout": "timeout", "error": "error", "crashed": "error"}


def episode_to_attempt(job: AttemptJob, ep: Any, pass_threshold: float, *, started: str, elapsed: float) -> AttemptResult:
    """Turn an ``EpisodeResult`` into the stored record (status from the pass rule for completed episodes)."""
    score = min(1.0, max(0.0, float(ep.score or 0.0)))
    status = _STATUS.get(ep.status, "error")
    if status is None:
        status = "passed" if score >= pass_threshold else "failed"
    calls = list(ep.calls or [])
    timings = {k: float(v) for k, v in (ep.timings or {}).items()}
    timings.setdefault("total", elapsed)
    error = ep.error
    if ep.status not in _STATUS:
        error = f"unknown episode status {ep.status!r}" + (f": {error}" if error else "")
    return AttemptResult(
        task_id=job.task_id,
        harness=job.harness,
        attempt=job.attempt,
        category=job.category,
        status=status,  # type: ignore[arg-type]  # one of AttemptStatus, mapped above
        score=score,
        subscores={k: float(v) for k, v in (ep.subscores or {}).items()},
        verifier_output=_utf8(str(ep.verifier_output or "")[-20000:]),
        error=None if error is None else _utf8(error),
        episode_status=str(ep.status),
        limit_hit=ep.limit_hit,
        session_id=ep.session_id,
        model_calls=len(calls),
        prompt_tokens=sum(len(c.prompt_ids or []) for c in calls),
        completion_tokens=sum(len(c.completion_ids or []) for c in calls),
        timings=timings,
        egress_attempts=[_utf8(e) for e in ep.egress_attempts],
        started_at=started,
        finished_at=_now(),
        notes=[_utf8(n) for n in ep.notes],
    )
