"""A named fake worker: deterministic episodes with no sandbox, harness or model.

It stands in for the real EpisodeWorker only where the runner's own logic is under test
(scheduling, concurrency, atomic writes, kill + resume, metrics, reports); the end-to-end tests
use the real worker.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path

from clawgym_env.capture.records import CallRecord
from clawgym_env.results import AttemptResult
from clawgym_env.runner import AttemptJob, RunConfig, SuiteInfo, TaskInfo, WorkerInfo

CATEGORIES = ("productivity", "analysis", "software")


def fake_outcome(task_id: str, harness: str, attempt: int) -> tuple[str, float]:
    """The fake's (status, score) for an attempt: a pure function of its key."""
    h = int(hashlib.sha256(f"{task_id}|{harness}|{attempt}".encode()).hexdigest(), 16)
    if h % 11 == 0:
        return "error", 0.0
    if h % 13 == 0:
        return "timeout", 0.0
    score = (0.0, 0.5, 1.0, 1.0)[h % 4]
    return ("passed" if score >= 1.0 else "failed"), score


class FakeEpisodeWorker:
    """Fake worker. ``suite`` is ``fake:N`` (N tasks); FAKE_EPISODE_S sets each episode's sleep."""

    max_running = 0
    _running = 0

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    @classmethod
    def describe_suite(cls, config: RunConfig) -> SuiteInfo:
        n = int(config.suite.split(":", 1)[1])
        tasks = [TaskInfo(f"fake/task-{i:02d}", CATEGORIES[i % 3], "easy") for i in range(n)]
        return SuiteInfo(name="fake", content_hash="f" * 64, pass_threshold=1.0, tasks=tasks)

    async def start(self) -> WorkerInfo:
        return WorkerInfo(harnesses={h: "0.0-fake" for h in self.config.harnesses}, model_info={"backend": "fake"})

    async def run(self, job: AttemptJob, capture_dir: Path, workspace_dir: Path | None) -> AttemptResult:
        cls = type(self)
        cls._running += 1
        cls.max_running = max(cls.max_running, cls._running)
        try:
            t0 = time.monotonic()
            calls = [
                CallRecord(
                    session_id=job.session_id,
                    call_index=i,
                    dialect="openai-chat",
                    messages=[{"role": "user", "content": f"do {job.task_id}"}],
                    prompt_ids=[1, 2, 3, 4 + i],
                    completion_ids=[5, 6],
                    logprobs=[-0.1, -0.2],
                    completion_text=f"step {i}",
                    response={"role": "assistant", "content": f"step {i}"},
                )
                for i in range(2)
            ]
            path = capture_dir / f"{job.session_id}.jsonl"
            with path.open("w", encoding="utf-8") as f:  # written line by line, like the proxy does
                for c in calls:
                    f.write(c.model_dump_json() + "\n")
                    f.flush()
                    await asyncio.sleep(float(os.environ.get("FAKE_EPISODE_S", "0.01")) / 2)
            if workspace_dir is not None:
                workspace_dir.mkdir(parents=True, exist_ok=True)
                (workspace_dir / "out.txt").write_text(job.task_id)
            status, score = fake_outcome(job.task_id, job.harness, job.attempt)
            return AttemptResult(
                task_id=job.task_id,
                harness=job.harness,
                attempt=job.attempt,
                category=job.category,
                status=status,
                score=score,
                subscores={"grade/done": score},
                session_id=job.session_id,
                error="fake crash" if status == "error" else None,
                model_calls=2,
                prompt_tokens=8,
                completion_tokens=4,
                timings={"sandbox": 0.01, "harness": 0.02, "model": 0.01, "verifier": 0.0, "total": time.monotonic() - t0},
            )
        finally:
            cls._running -= 1

    async def stop(self) -> None:
        pass


class BuggyWorker(FakeEpisodeWorker):
    """Fake whose 5th episode hits a bug (not an episode outcome): the run must stop, not record it."""

    calls = 0

    async def run(self, job: AttemptJob, capture_dir: Path, workspace_dir: Path | None) -> AttemptResult:
        type(self).calls += 1
        if type(self).calls == 5:
            raise RuntimeError("bug in worker")
        return await super().run(job, capture_dir, workspace_dir)
