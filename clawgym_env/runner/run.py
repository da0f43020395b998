"""The driver: plan a run's attempts, hand them to an executor, record each as it finishes; resume."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import socket
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clawgym_env._version import __version__
from clawgym_env.errors import ConfigError, RunError
from clawgym_env.metrics import compute_metrics
from clawgym_env.results import AttemptResult, RunManifest, attempt_filename
from clawgym_env.runner.config import AttemptJob, RunConfig, RunSummary, SuiteInfo, TaskInfo, WorkerInfo, import_object
from clawgym_env.runner.folder import cleanup_unfinished, load_attempts, load_manifest, write_json_atomic


def plan_jobs(tasks: list[TaskInfo], harnesses: list[str], attempts: int) -> list[AttemptJob]:
    """All attempts of a run, attempt-major so partial results cover every task early."""
    return [
        AttemptJob(task_id=t.task_id, harness=h, attempt=k, category=t.category) for k in range(attempts) for t in tasks for h in harnesses
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


def default_out() -> Path:
    """runs/<UTC timestamp>/: where a run goes when no --out is given."""
    return Path("runs") / datetime.now(UTC).strftime("%Y-%m-%d-%H%M%S")


async def run_benchmark(config: RunConfig, *, progress: bool = True) -> RunSummary:
    """Run (or continue) a benchmark and return its summary.

    If ``config.out`` already holds a run, this continues it (same as :func:`resume`) after
    checking that the config and the suite are unchanged.
    """
    t0 = time.monotonic()
    out_dir = Path(config.out) if config.out else default_out()
    config = dataclasses.replace(config, out=str(out_dir))
    worker_cls = import_object(config.worker)
    suite = worker_cls.describe_suite(config)
    if not suite.tasks:
        raise ConfigError(f"suite {suite.name!r}: pattern {config.tasks!r} selects no task; run `clawgym tasks list {suite.name}`")
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
    cleanup_unfinished(out_dir, finished)
    done_names = {attempt_filename(a.task_id, a.harness, a.attempt) for a in finished}
    jobs = [j for j in plan_jobs(suite.tasks, config.harnesses, config.attempts) if j.filename not in done_names]

    from clawgym_env.report.progress import RunProgress

    display = RunProgress(total=len(jobs) + len(finished), already=finished, pass_threshold=suite.pass_threshold, enabled=progress)

    async def on_done(result: AttemptResult) -> None:
        write_json_atomic(
            out_dir / "attempts" / attempt_filename(result.task_id, result.harness, result.attempt), result.model_dump_json(indent=2)
        )
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


def run_differences(config: RunConfig, suite: SuiteInfo, manifest: RunManifest) -> dict[str, tuple[Any, Any]]:
    """Where ``manifest`` is not the run ``config`` makes of ``suite``: field -> (recorded, this run's); empty: the same."""
    mine = {
        "suite_hash": suite.content_hash,
        "model": config.model,
        "attempts": config.attempts,
        "task_ids": [t.task_id for t in suite.tasks],
        "harnesses": sorted(config.harnesses),
        "sampling": config.sampling(),
    }
    theirs = {
        "suite_hash": manifest.suite_hash,
        "model": manifest.model,
        "attempts": manifest.attempts,
        "task_ids": manifest.task_ids,
        "harnesses": sorted(manifest.harnesses),
        "sampling": manifest.sampling,
    }
    return {k: (theirs[k], mine[k]) for k in mine if mine[k] != theirs[k]}


def _check_same_run(out_dir: Path, config: RunConfig, suite: SuiteInfo, manifest: RunManifest) -> None:
    """Refuse to mix two different runs (or two versions of a suite) in one folder."""
    diff = run_differences(config, suite, manifest)
    if "suite_hash" in diff:
        raise RunError(
            f"{out_dir}/manifest.json: suite {manifest.suite!r} changed since this run began "
            f"(hash {manifest.suite_hash} -> {suite.content_hash}); results would mix task versions. "
            "Start a new run with another --out."
        )
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
