"""Run a benchmark: every (task x harness x attempt) episode, concurrently and resumably.

The results folder (format in :mod:`clawgym_env.results`) is the run's only state::

    manifest.json     what ran (RunManifest), written once, atomically
    config.json       the RunConfig, so ``resume(dir)`` needs nothing else
    attempts/*.json   one AttemptResult per *finished* attempt, written tmp + fsync + rename
    captures/*.jsonl  the proxy's capture of each episode
    workspaces/*/     final workspaces (``save_workspaces``)

An attempt counts as finished exactly when its attempts/ file exists, and that file is written
only after its capture is complete, so a SIGKILL at any moment loses no finished attempt; resume
deletes the leftovers of unfinished ones and reruns only those.

Episodes run in a *worker* (one per process, or one Ray actor per node): it owns what episodes
share: the suite, the policy backend, the proxy, the harness adapters. The default worker is
:class:`EpisodeWorker` (the real ``run_episode``); ``RunConfig.worker`` names another class
("module:Class") for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import importlib
import json
import logging
import os
import platform
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from clawgym_env import __version__
from clawgym_env.errors import ClawGymError, ConfigError, RunError
from clawgym_env.metrics import Metrics, compute_metrics
from clawgym_env.results import AttemptResult, RunManifest, attempt_filename

log = logging.getLogger("clawgym.runner")

__all__ = [
    "AttemptJob",
    "EpisodeWorker",
    "RunConfig",
    "RunSummary",
    "SuiteInfo",
    "TaskInfo",
    "TrainableWorker",
    "Worker",
    "WorkerInfo",
    "load_attempts",
    "load_manifest",
    "plan_jobs",
    "resume",
    "run_benchmark",
    "write_json_atomic",
]

DEFAULT_WORKER = "clawgym_env.runner:EpisodeWorker"


# ----------------------------------------------------------------------------- config and data


@dataclass
class RunConfig:
    """What ``clawgym bench run`` was asked to do; stored as config.json for ``resume``."""

    model: str = "default"
    """Policy spec for ``backend_from_spec``: default, hf:PATH, vllm:URL, openai:URL#MODEL, scripted:FILE ..."""
    harnesses: list[str] = field(default_factory=lambda: ["custom"])
    suite: str = "clawgym-original"
    """Suite name or folder."""
    tasks: str | None = None
    """fnmatch pattern over task ids (e.g. ``smoke-*``); None selects all."""
    attempts: int = 1
    """k: attempts per (task, harness)."""
    concurrency: int = 4
    """Episodes in flight per worker (per node on Ray)."""
    sandbox: str = "bwrap"
    out: str | None = None
    """Results folder; default runs/<UTC timestamp>/."""
    executor: str = "local"
    ray_address: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    judge: str | None = None
    """Backend spec for rubric verifiers; None leaves rubric items to the verifier's default."""
    save_workspaces: bool = False
    wall_time_s: float | None = None
    """Per-episode wall-time limit overriding the tasks' own (training rollouts set it)."""
    worker: str = DEFAULT_WORKER
    """"module:Class" of the worker; tests name a fake here."""

    def __post_init__(self) -> None:
        if isinstance(self.harnesses, str):
            self.harnesses = [h.strip() for h in self.harnesses.split(",") if h.strip()]
        if not self.harnesses:
            raise ConfigError("RunConfig.harnesses is empty: pass --harness NAME[,NAME]")
        if len(set(self.harnesses)) != len(self.harnesses):
            raise ConfigError(f"RunConfig.harnesses repeats a name: {self.harnesses}; list each harness once")
        if self.attempts < 1:
            raise ConfigError(f"RunConfig.attempts must be >= 1 (got {self.attempts}): pass -k 1 or more")
        if self.concurrency < 1:
            raise ConfigError(f"RunConfig.concurrency must be >= 1 (got {self.concurrency}): pass --concurrency 1 or more")
        if self.executor not in ("local", "ray"):
            raise ConfigError(f"RunConfig.executor {self.executor!r} is unknown: use 'local' or 'ray'")
        from clawgym_env.sandbox import BACKENDS, backend_class

        if self.sandbox not in BACKENDS:  # fail now, not as an error record for every attempt
            backend_class(self.sandbox)
        if ":" not in self.worker:
            raise ConfigError(f"RunConfig.worker {self.worker!r} must be 'module:Class'")
        if self.temperature is not None and self.temperature < 0:
            raise ConfigError(f"--temperature must be >= 0 (got {self.temperature}); 0 means greedy")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ConfigError(f"--top-p must be in (0, 1] (got {self.top_p})")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError(f"--max-tokens must be >= 1 (got {self.max_tokens})")

    def sampling(self) -> dict[str, Any]:
        """Sampling parameters that were set (the harness's own values apply to the rest)."""
        keys = ("max_tokens", "temperature", "top_p", "seed")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}

    def attempt_sampling(self, task_id: str, harness: str, attempt: int) -> dict[str, Any]:
        """``sampling()`` for one attempt: ``--seed`` becomes that attempt's own seed.

        The run's seed sent as is with every request made every attempt of a task draw the same
        tokens, so pass@k at T > 0 measured one sample k times; a seed derived from (run seed,
        task, harness, attempt) keeps the run reproducible and the attempts independent.
        """
        s = self.sampling()
        if "seed" in s:
            key = f"{s['seed']}:{task_id}:{harness}:{attempt}".encode()
            s["seed"] = int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "big") & 0x7FFFFFFF
        return s

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "config.json") -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {sorted(unknown)}; it was written by another clawgym version")
        return cls(**data)


@dataclass(frozen=True)
class TaskInfo:
    """What the driver needs to know about one task to plan and label attempts."""

    task_id: str
    category: str = ""
    difficulty: str = ""


@dataclass(frozen=True)
class SuiteInfo:
    """The selected part of a suite: enough for the manifest and the plan."""

    name: str
    content_hash: str
    pass_threshold: float
    tasks: list[TaskInfo]
    warnings: list[str] = field(default_factory=list)
    """Shown before the run starts (e.g. rubric tasks without a judge)."""


@dataclass(frozen=True)
class WorkerInfo:
    """What a started worker reports for the manifest."""

    harnesses: dict[str, str]
    """name -> version."""
    model_info: dict[str, Any] = field(default_factory=dict)
    evaluation_only: bool = False


@dataclass(frozen=True)
class AttemptJob:
    """One attempt to run."""

    task_id: str
    harness: str
    attempt: int
    category: str = ""
    session_id: str = ""
    """A fresh id per try (a rerun after a kill gets a new one)."""
    replay: str = ""
    """A capture to branch: calls 0..branch_at-1 are answered from it (``ReplayBackend``); "" = a fresh rollout.
    The path must be readable where the attempt runs (shared storage on a multi-node Ray cluster)."""
    branch_at: int = 0

    @property
    def filename(self) -> str:
        return attempt_filename(self.task_id, self.harness, self.attempt)


class Worker(Protocol):
    """Runs episodes in one process. ``describe_suite`` is called on the class, by the driver."""

    def __init__(self, config: RunConfig) -> None: ...

    @classmethod
    def describe_suite(cls, config: RunConfig) -> SuiteInfo: ...

    async def start(self) -> WorkerInfo: ...

    async def run(self, job: AttemptJob, capture_dir: Path, workspace_dir: Path | None) -> AttemptResult:
        """Run one attempt; write its capture to ``capture_dir/<session_id>.jsonl``. Never raises for
        an episode that went wrong: that is an AttemptResult with status error/timeout."""
        ...

    async def stop(self) -> None: ...


@runtime_checkable
class TrainableWorker(Protocol):
    """A worker whose policy backend can take new weights (training rollouts)."""

    async def update_weights(self, state: Mapping[str, Any], version: int) -> None: ...


@dataclass
class RunSummary:
    """What a finished (or resumed) run returns."""

    out_dir: Path
    manifest: RunManifest
    attempts: list[AttemptResult]
    metrics: Metrics
    ran: int
    """Attempts run by this call (the rest were already finished)."""
    elapsed_s: float


# ----------------------------------------------------------------------------- folder I/O


def write_json_atomic(path: Path, data: str) -> None:
    """Write ``data`` to ``path`` so that a reader (or a crash) sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _first_error(exc: ValueError) -> str:
    """One line for a pydantic error (its str() spans several lines and ends in a URL)."""
    if isinstance(exc, ValidationError) and exc.errors():
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        more = f"; {exc.error_count() - 1} more" if exc.error_count() > 1 else ""
        return f"{where + ': ' if where else ''}{err['msg']}{more}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def load_manifest(out_dir: Path) -> RunManifest:
    """Read ``manifest.json`` of a results folder, with a clear error if it is missing or invalid."""
    path = Path(out_dir) / "manifest.json"
    if not path.is_file():
        raise RunError(f"{path}: no manifest.json; is {out_dir} a `clawgym bench run` results folder?")
    try:
        return RunManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RunError(f"{path}: invalid manifest ({_first_error(exc)}); the folder is corrupt or from another version") from exc


def load_attempts(out_dir: Path) -> list[AttemptResult]:
    """Every finished attempt of a results folder, sorted by (task, harness, attempt)."""
    adir = Path(out_dir) / "attempts"
    out: list[AttemptResult] = []
    if not adir.is_dir():
        return out
    for p in sorted(adir.glob("*.json")):
        if p.name.startswith(".tmp-"):
            continue
        try:
            out.append(AttemptResult.model_validate_json(p.read_text(encoding="utf-8")))
        except ValueError as exc:
            raise RunError(f"{p}: invalid attempt record ({_first_error(exc)}); delete it and run "
                           f"`clawgym bench resume {out_dir}` to rerun that attempt") from exc
    out.sort(key=lambda a: (a.task_id, a.harness, a.attempt))
    return out


def plan_jobs(tasks: list[TaskInfo], harnesses: list[str], attempts: int) -> list[AttemptJob]:
    """All attempts of a run, attempt-major so partial results cover every task early."""
    return [
        AttemptJob(task_id=t.task_id, harness=h, attempt=k, category=t.category)
        for k in range(attempts)
        for t in tasks
        for h in harnesses
    ]


def _machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count() or 0,
    }
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo", encoding="utf-8") as f:
        info["memory_gb"] = round(int(f.readline().split()[1]) / 1024**2, 1)
    return info


def _import(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {spec!r} ({exc}); give an importable 'module:Class'") from exc


def _default_out() -> Path:
    return Path("runs") / datetime.now(UTC).strftime("%Y-%m-%d-%H%M%S")


def _cleanup_unfinished(out_dir: Path, finished: list[AttemptResult]) -> int:
    """Delete tmp files, captures and workspaces that no finished attempt refers to (killed episodes)."""
    keep = {a.session_id for a in finished}
    keep_ws = {attempt_filename(a.task_id, a.harness, a.attempt)[:-5] for a in finished}
    removed = 0
    for p in (out_dir / "attempts").glob(".tmp-*"):
        p.unlink(missing_ok=True)
        removed += 1
    for p in (out_dir / "captures").glob("*"):
        if p.name.split(".", 1)[0] not in keep:
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
            removed += 1
    wdir = out_dir / "workspaces"
    if wdir.is_dir():
        for p in wdir.iterdir():
            if p.name not in keep_ws:
                shutil.rmtree(p, ignore_errors=True)
                removed += 1
    return removed


# ----------------------------------------------------------------------------- the run


OnDone = Callable[[AttemptResult], None]
OnStart = Callable[[AttemptJob], None]


async def run_benchmark(config: RunConfig, *, progress: bool = True) -> RunSummary:
    """Run (or continue) a benchmark and return its summary.

    If ``config.out`` already holds a run, this continues it (same as :func:`resume`) after
    checking that the config and the suite are unchanged.
    """
    t0 = time.monotonic()
    out_dir = Path(config.out) if config.out else _default_out()
    config = dataclasses.replace(config, out=str(out_dir))
    worker_cls = _import(config.worker)
    suite = worker_cls.describe_suite(config)
    if not suite.tasks:
        raise ConfigError(
            f"suite {suite.name!r}: pattern {config.tasks!r} selects no task; run `clawgym tasks list {suite.name}`"
        )
    if progress:
        from rich.console import Console

        for w in suite.warnings:
            Console(stderr=True).print(f"[yellow]warning:[/] {w}")
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir}: is a file, not a folder; pick a new folder for the results")
    out_dir.mkdir(parents=True, exist_ok=True)
    for sub in ("attempts", "captures"):
        (out_dir / sub).mkdir(exist_ok=True)
    manifest_path = out_dir / "manifest.json"
    existing: RunManifest | None = None
    if manifest_path.exists():
        existing = load_manifest(out_dir)
        _check_same_run(out_dir, config, suite, existing)
    else:
        write_json_atomic(out_dir / "config.json", json.dumps(config.to_dict(), indent=2))

    finished = load_attempts(out_dir)
    _cleanup_unfinished(out_dir, finished)
    done_names = {attempt_filename(a.task_id, a.harness, a.attempt) for a in finished}
    jobs = [j for j in plan_jobs(suite.tasks, config.harnesses, config.attempts) if j.filename not in done_names]

    from clawgym_env.report.progress import RunProgress

    display = RunProgress(total=len(jobs) + len(finished), already=finished, pass_threshold=suite.pass_threshold,
                          enabled=progress)

    async def on_done(result: AttemptResult) -> None:
        write_json_atomic(out_dir / "attempts" / attempt_filename(result.task_id, result.harness, result.attempt),
                          result.model_dump_json(indent=2))
        display.finished(result)

    manifest = existing
    from clawgym_env.executors import JobQueue, make_executor

    executor = make_executor(config)
    info = await executor.start()
    try:
        if manifest is None:
            manifest = _new_manifest(config, suite, info)
            write_json_atomic(manifest_path, manifest.model_dump_json(indent=2))
        with display:
            await executor.run(JobQueue(jobs, closed=True), out_dir, display.started, on_done)
    finally:
        await executor.stop()
    assert manifest is not None  # written above on every path
    attempts = load_attempts(out_dir)
    return RunSummary(
        out_dir=out_dir,
        manifest=manifest,
        attempts=attempts,
        metrics=compute_metrics(attempts, manifest.pass_threshold),
        ran=len(jobs),
        elapsed_s=time.monotonic() - t0,
    )


def _new_manifest(config: RunConfig, suite: SuiteInfo, info: WorkerInfo) -> RunManifest:
    return RunManifest(
        run_id=Path(config.out or "run").name + "-" + uuid.uuid4().hex[:6],
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        clawgym_version=__version__,
        suite=suite.name,
        suite_hash=suite.content_hash,
        task_ids=[t.task_id for t in suite.tasks],
        harnesses={h: info.harnesses.get(h, "") for h in config.harnesses},
        model=config.model,
        model_info=info.model_info,
        attempts=config.attempts,
        sampling=config.sampling(),
        pass_threshold=suite.pass_threshold,
        sandbox=config.sandbox,
        executor=config.executor,
        machine=_machine_info(),
        evaluation_only=info.evaluation_only,
    )


def _check_same_run(out_dir: Path, config: RunConfig, suite: SuiteInfo, manifest: RunManifest) -> None:
    """Refuse to mix two different runs (or two versions of a suite) in one folder."""
    if manifest.suite_hash != suite.content_hash:
        raise RunError(
            f"{out_dir}/manifest.json: suite {manifest.suite!r} changed since this run began "
            f"(hash {manifest.suite_hash} -> {suite.content_hash}); results would mix task versions. "
            "Start a new run with another --out."
        )
    mine = {"model": config.model, "attempts": config.attempts, "task_ids": [t.task_id for t in suite.tasks],
            "harnesses": sorted(config.harnesses), "sampling": config.sampling()}
    theirs = {"model": manifest.model, "attempts": manifest.attempts, "task_ids": manifest.task_ids,
              "harnesses": sorted(manifest.harnesses), "sampling": manifest.sampling}
    diff = [k for k in mine if mine[k] != theirs[k]]
    if diff:
        raise RunError(
            f"{out_dir}/manifest.json: this folder holds another run (differs in {', '.join(diff)}); "
            "use `clawgym bench resume DIR` to continue it, or pick another --out"
        )


async def resume(out_dir: str | Path, *, progress: bool = True, executor: str | None = None) -> RunSummary:
    """Continue an interrupted run: rerun only the attempts that have no attempts/ file yet.

    Works from config.json alone, so a run killed before its manifest was written resumes too.
    """
    out_dir = Path(out_dir)
    cpath = out_dir / "config.json"
    if not cpath.is_file():
        load_manifest(out_dir)  # names the problem when the folder is not a results folder at all
        raise RunError(f"{cpath}: missing; this folder cannot be resumed (it was not written by `bench run`)")
    try:
        data = json.loads(cpath.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RunError(f"{cpath}: not valid JSON ({exc})") from exc
    config = RunConfig.from_dict(data, where=str(cpath))
    config.out = str(out_dir)
    if executor:
        config.executor = executor
    return await run_benchmark(config, progress=progress)


# ----------------------------------------------------------------------------- the real worker


class EpisodeWorker:
    """Runs real episodes: suite from ``load_suite``, backend from ``backend_from_spec``, one proxy
    for every episode of this process, harness adapters from the registry."""

    def __init__(self, config: RunConfig, *, backend: Any | None = None, tasks: list[Any] | None = None,
                 harnesses: Mapping[str, Any] | None = None) -> None:
        """``backend``, ``tasks`` and ``harnesses`` (name -> adapter) given here are used instead of
        building them from the config (a trainer's in-process policy); the caller closes ``backend``."""
        self.config = config
        self._given = (backend, tasks, dict(harnesses or {}))
        self._tasks: dict[str, Any] = {}
        self._harnesses: dict[str, Any] = {}
        self._backend: Any = None
        self._judge: Any = None
        self._proxy: Any = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._pass_threshold = 1.0

    @staticmethod
    def _load_suite(config: RunConfig) -> Any:
        from clawgym_env.task import load_suite

        suite = load_suite(config.suite)
        return suite, (suite.select(config.tasks) if config.tasks else list(suite.tasks))

    @classmethod
    def describe_suite(cls, config: RunConfig) -> SuiteInfo:
        suite, tasks = cls._load_suite(config)
        rubric = [t.full_id for t in tasks if any(getattr(v, "kind", "") == "rubric" for v in t.verifiers)]
        warnings = []
        if rubric and not config.judge:
            warnings.append(f"{len(rubric)} task(s) have rubric verifiers (e.g. {rubric[0]}) but no --judge was given: "
                            "their rubric items will score 0. Pass --judge SPEC (e.g. openai:URL#MODEL).")
        return SuiteInfo(
            name=suite.name,
            content_hash=suite.content_hash,
            pass_threshold=float(suite.pass_threshold),
            tasks=[TaskInfo(t.full_id, getattr(t, "category", ""), getattr(t, "difficulty", "")) for t in tasks],
            warnings=warnings,
        )

    async def start(self) -> WorkerInfo:
        from clawgym_env.harness_install import cache_root
        from clawgym_env.harness_registry import load_harness
        from clawgym_env.proxy import ProxyServer
        from clawgym_env.proxy.backends.factory import backend_from_spec

        backend, given_tasks, given_harnesses = self._given
        if given_tasks is None:
            suite, given_tasks = self._load_suite(self.config)
            self._pass_threshold = float(suite.pass_threshold)
        self._tasks = {t.full_id: t for t in given_tasks}
        self._harnesses = {n: given_harnesses.get(n) or load_harness(n) for n in self.config.harnesses}
        for h in self._harnesses.values():  # not installed: one error now, not an error record per attempt
            h.mounts(cache_root())
        self._backend = backend if backend is not None else backend_from_spec(self.config.model)
        if self.config.judge:
            self._judge = backend_from_spec(self.config.judge, option="--judge")
        self._tmp = tempfile.TemporaryDirectory(prefix="clawgym-run-")
        self._proxy = ProxyServer(host="127.0.0.1", port=0, uds_path=Path(self._tmp.name) / "proxy.sock")
        await self._proxy.start()
        return WorkerInfo(
            harnesses={n: str(getattr(h, "version", "")) for n, h in self._harnesses.items()},
            model_info={"name": str(getattr(self._backend, "model_name", "")),
                        "backend": type(self._backend).__name__,
                        "token_level": bool(getattr(self._backend, "TOKEN_LEVEL", True))},
            evaluation_only=not bool(getattr(self._backend, "TOKEN_LEVEL", True)),
        )

    async def run(self, job: AttemptJob, capture_dir: Path, workspace_dir: Path | None) -> AttemptResult:
        from clawgym_env.episode import run_episode

        task = self._tasks[job.task_id]
        started = _now()
        t0 = time.monotonic()
        limit = float(self.config.wall_time_s or getattr(getattr(task, "limits", None), "wall_time_s", 600) or 600)
        backend = self._backend
        if job.replay:
            from clawgym_env.proxy.backends.replay import ReplayBackend
            from clawgym_env.tree.build import load_calls

            try:
                backend = ReplayBackend(load_calls(job.replay), job.branch_at, self._backend)
            except ClawGymError as exc:
                return _error_result(job, "error", f"{type(exc).__name__}: {exc}", started, t0)
        try:
            ep = await asyncio.wait_for(
                run_episode(task, self._harnesses[job.harness], backend, proxy=self._proxy,
                            sandbox=self.config.sandbox, capture_dir=capture_dir, workspace_out=workspace_dir,
                            judge=self._judge,
                            sampling=self.config.attempt_sampling(job.task_id, job.harness, job.attempt) or None,
                            wall_time_s=self.config.wall_time_s, session_id=job.session_id or None),
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
        task_id=job.task_id, harness=job.harness, attempt=job.attempt, category=job.category,
        status=status,  # type: ignore[arg-type]
        score=0.0, error=error, session_id=job.session_id, timings={"total": time.monotonic() - t0},
        started_at=started, finished_at=_now(),
    )


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
        task_id=job.task_id, harness=job.harness, attempt=job.attempt, category=job.category,
        status=status,  # type: ignore[arg-type]
        score=score,
        subscores={k: float(v) for k, v in (ep.subscores or {}).items()},
        verifier_output=str(ep.verifier_output or "")[-20000:],
        error=error,
        episode_status=str(ep.status),
        session_id=ep.session_id,
        model_calls=len(calls),
        prompt_tokens=sum(len(c.prompt_ids or []) for c in calls),
        completion_tokens=sum(len(c.completion_ids or []) for c in calls),
        timings=timings,
        egress_attempts=list(ep.egress_attempts),
        started_at=started,
        finished_at=_now(),
        notes=list(getattr(ep, "notes", None) or []),
    )
