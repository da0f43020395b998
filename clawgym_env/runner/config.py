"""What a run is asked to do and the shapes the driver and its workers exchange.

``RunConfig`` is stored as config.json so that ``resume(dir)`` needs nothing else; ``Worker`` is the
protocol an executor drives (one per process, or one Ray actor per node).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from clawgym_env.errors import ConfigError
from clawgym_env.metrics import Metrics
from clawgym_env.results import AttemptResult, RunManifest, attempt_filename

DEFAULT_WORKER = "clawgym_env.runner:EpisodeWorker"


@dataclass
class RunConfig:
    """What ``clawgym bench run`` was asked to do; stored as config.json for ``resume``."""

    model: str = "default"
    """Policy spec for ``backend_from_spec``: default, hf:PATH, vllm:URL, openai:URL#MODEL, scripted:FILE ..."""
    harnesses: list[str] = field(default_factory=lambda: ["custom"])
    suite: str = "clawgym-original"
    """Suite name or folder."""
    tasks: str | None = None
    """fnmatch pattern(s) over task ids, comma-separated (e.g. ``smoke-*`` or ``a-0[12],b-*``); None selects all."""
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
        given = {"max_tokens": self.max_tokens, "temperature": self.temperature, "top_p": self.top_p, "seed": self.seed}
        return {k: v for k, v in given.items() if v is not None}

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


def import_object(spec: str) -> Any:
    """The object a "module:attr" spec names (``RunConfig.worker``, an executor's worker class)."""
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {spec!r} ({exc}); give an importable 'module:Class'") from exc
