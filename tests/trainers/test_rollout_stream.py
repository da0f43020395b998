"""RolloutStream over the local executor with the runner's named fake worker (no sandboxes):
groups assemble from attempts, refused (stale) groups are counted and replaced, lookahead keeps
groups in flight while the caller trains."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

from clawgym_env._sync import LoopThread
from clawgym_env.executors.local import LocalExecutor
from clawgym_env.runner import RunConfig
from trainers.rollout_stream import RolloutStream

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clawgym_env" / "runner"))
from runner_fakes import FakeEpisodeWorker  # noqa: E402


class Task:
    def __init__(self, i: int) -> None:
        self.full_id = f"fake/task-{i:02d}"


def stream(lookahead: int) -> tuple[RolloutStream, LoopThread, LocalExecutor]:
    config = RunConfig(model="scripted:fake", harnesses=["custom"], suite="fake:4", concurrency=3, worker="runner_fakes:FakeEpisodeWorker")
    loop = LoopThread()
    executor = LocalExecutor(config, FakeEpisodeWorker(config))
    loop.run(executor.start())
    tasks = iter(range(1000))
    s = RolloutStream(
        executor, loop, num_generations=3, next_pair=lambda: (Task(next(tasks) % 4), "custom"), lookahead=lookahead, rng=random.Random(0)
    )
    return s, loop, executor


def close(s: RolloutStream, loop: LoopThread, executor: Any) -> None:
    s.close()
    loop.run(executor.stop())
    loop.close()


def test_refused_groups_are_counted_and_replaced() -> None:
    s, loop, ex = stream(lookahead=0)
    try:
        done, refused = s.take(2, keep=lambda g: g.gid != 1)
        assert refused == 1 and sorted(g.gid for g in done) == [0, 2]
        for g in done:
            assert len(g.episodes) == 3 and all(e.task_id == g.pair[0].full_id for e in g.episodes)
            assert all(len(e.calls) == 2 for e in g.episodes if e.status != "error")
        assert s.busy_seconds() > 0 and s._in_flight == 0  # sync: nothing sampled ahead
    finally:
        close(s, loop, ex)


def test_lookahead_keeps_groups_sampling_while_the_caller_trains() -> None:
    s, loop, ex = stream(lookahead=2)
    try:
        first, _ = s.take(2)
        assert s._in_flight == 2  # the next step's groups were requested before this one trains
        asked = time.monotonic()
        second, _ = s.take(2)
        assert {g.gid for g in first} == {0, 1} and {g.gid for g in second} == {2, 3}
        assert all(g.requested_at < asked for g in second)
    finally:
        close(s, loop, ex)


def test_groups_requested_while_others_run_keep_their_own_attempts() -> None:
    """K = 2 steps sampled ahead: new groups are requested while older ones still run (attempt numbers never reused)."""
    s, loop, ex = stream(lookahead=4)
    try:
        seen: set[int] = set()
        for _ in range(4):
            done, _ = s.take(2)
            for g in done:
                assert len(g.episodes) == 3 and all(e.task_id == g.pair[0].full_id for e in g.episodes)
                seen.add(g.gid)
        assert len(seen) == 8 and s._in_flight == 4
    finally:
        close(s, loop, ex)
