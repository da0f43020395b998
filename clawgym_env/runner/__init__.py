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

Modules: ``config`` (RunConfig, the job and info shapes, the Worker protocols), ``folder`` (the
results folder on disk), ``run`` (the driver: run_benchmark, resume), ``worker`` (EpisodeWorker).
"""

from clawgym_env.runner.config import (
    DEFAULT_WORKER,
    AttemptJob,
    RunConfig,
    RunSummary,
    SuiteInfo,
    TaskInfo,
    TrainableWorker,
    Worker,
    WorkerInfo,
    import_object,
)
from clawgym_env.runner.folder import load_attempts, load_manifest, write_json_atomic
from clawgym_env.runner.run import plan_jobs, resume, run_benchmark, run_differences
from clawgym_env.runner.worker import EpisodeWorker, episode_to_attempt

__all__ = [
    "DEFAULT_WORKER",
    "AttemptJob",
    "EpisodeWorker",
    "RunConfig",
    "RunSummary",
    "SuiteInfo",
    "TaskInfo",
    "TrainableWorker",
    "Worker",
    "WorkerInfo",
    "episode_to_attempt",
    "import_object",
    "load_attempts",
    "load_manifest",
    "plan_jobs",
    "resume",
    "run_benchmark",
    "run_differences",
    "write_json_atomic",
]
