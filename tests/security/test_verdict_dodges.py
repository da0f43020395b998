"""Ways out of a grade: an agent that makes its episode end as something training leaves out.

Training leaves an infrastructure error (status "error") out of the group's baseline and loss, so an
agent that could turn its episode into one would never be pushed away from what it did. Each attack
drives the real custom harness through ``run_benchmark`` (the executor training uses) in real
sandboxes, then reads the record back as the trainer does (``episode_from_attempt``).
"""

from __future__ import annotations

import pytest

from clawgym_env.metrics import compute_metrics
from tests.security.conftest import ORIGINAL, Attack, bash, write
from trainers.rollout import episode_reward
from trainers.rollout_stream import episode_from_attempt


@pytest.mark.parametrize("then", ["kill -9 $PPID", "kill -TERM $PPID; sleep 5"], ids=["KILL", "TERM"])
async def test_an_agent_that_kills_its_harness_is_graded_as_a_crash(backend: str, attack: Attack, then: str, tmp_path) -> None:
    """The right answer, then the harness killed: a crash never passes in bench, and trains with the crash
    reward, not left out (a mask would make ``kill $PPID`` the way out of every failing episode)."""
    summary, rec = await attack(ORIGINAL, "smoke-hello-file-p0", [write("hello.txt", "hello world\n"), bash(then)], backend)
    assert rec.status == "error" and rec.episode_status == "crashed" and rec.limit_hit is None, (rec.status, rec.error)
    assert "harness exited with code" in (rec.error or "") and rec.score == 1.0, (rec.error, rec.score)  # right, but crashed
    assert compute_metrics(summary.attempts, pass_threshold=1.0).overall.passed == 0
    ep = episode_from_attempt(rec, tmp_path / "no-capture.jsonl")
    assert ep.status == "crashed"
    assert episode_reward(ep) == 0.0  # the default: trained, at the crash reward
    assert episode_reward(ep, "mask") is None  # what the default was before, and why it changed
