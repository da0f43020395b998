"""Rollout bookkeeping without sandboxes: mix sampling, error drops, staleness, filters, zero variance."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest

from clawgym_env.capture.records import CallRecord
from clawgym_env.episode import EpisodeResult
from clawgym_env.errors import ConfigError
from trainers.rollout import (
    RolloutBatch,
    group_staleness,
    make_group,
    rollout_metrics,
    sample_pairs,
    tree_filters,
)
from trainers.tree_grpo.config import TreeGRPOConfig

FILTERS = tree_filters(drop_retries=True, max_leaves=None, exclude_subagents=False)


def episode(sid: str, score: float, *, status: str = "completed", version: int = 0, completion: tuple[int, ...] = (7, 8)) -> EpisodeResult:
    call = CallRecord(
        session_id=sid,
        call_index=0,
        dialect="openai-chat",
        prompt_ids=[1, 2, 3],
        completion_ids=list(completion),
        logprobs=[-0.5] * len(completion),
        policy_version=version,
    )
    return EpisodeResult(session_id=sid, task_id="toy/t", harness="custom", status=status, score=score, calls=[call])  # type: ignore[arg-type]


def test_mix_weights_set_the_harness_frequencies() -> None:
    pairs = sample_pairs(["t1", "t2"], ["custom", "claude-code"], [3.0, 1.0], 4000, random.Random(0))  # type: ignore[list-item]
    counts = Counter(h for _, h in pairs)
    assert 0.72 < counts["custom"] / 4000 < 0.78
    assert {t for t, _ in pairs} == {"t1", "t2"}
    assert all(h == "custom" for _, h in sample_pairs(["t"], ["custom", "x"], [1.0, 0.0], 50, random.Random(1)))  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="one weight per harness"):
        sample_pairs(["t"], ["a", "b"], [1.0], 1, random.Random(0))  # type: ignore[list-item]


def test_errors_leave_the_baseline_and_staleness_is_the_oldest_version_of_a_group() -> None:
    eps = [
        episode("a", 1.0, version=1),
        episode("b", 0.0, completion=(9,), version=2),
        episode("c", 0.0, status="error"),
        episode("d", 0.5, version=1),
    ]
    g = make_group("toy/t", "custom", eps, filters=FILTERS)
    assert set(g.rewards) == {"a", "b", "d"}  # the infrastructure failure says nothing about the policy
    assert g.dropped["error"] == ["c"]
    assert g.tree is not None and sorted(g.tree.episodes) == ["a", "b", "d"]
    assert g.versions == {1, 2} and g.statuses == {"completed": 3, "error": 1}
    # a and d sampled the same ids: one shared token path, two samplers
    assert g.tree.num_trainable == 3
    assert group_staleness(eps, 3) == 2 and group_staleness(eps, 1) == 0
    assert group_staleness([episode("x", 0.0, status="error")], 5) == 0  # an error trains nothing: not stale


def test_zero_variance_and_metrics_per_harness() -> None:
    flat = make_group("toy/t", "custom", [episode("a", 1.0), episode("b", 1.0)], filters=FILTERS)
    varied = make_group("toy/t", "claude-code", [episode("c", 1.0), episode("d", 0.0)], filters=FILTERS)
    assert flat.zero_variance and not varied.zero_variance
    m = rollout_metrics(RolloutBatch(groups=[varied], skipped=[(flat, "zero reward variance")]))
    assert m["reward/custom"] == 1.0 and m["reward/claude-code"] == 0.5 and m["reward"] == 0.75
    assert m["frac_reward_zero_std"] == 0.5 and m["groups_skipped"] == 1.0


def test_crashed_episodes_train_with_the_crash_reward_by_default() -> None:
    """A crash never passes in bench run, and an agent can always crash its harness: masked, a crash
    would be its way out of a failing grade (c scored 0.7 on what it left, but crashed)."""
    eps = [episode("a", 1.0), episode("b", 0.0, completion=(9,)), episode("c", 0.7, status="crashed", completion=(5, 6))]
    g = make_group("toy/t", "claude-code", eps, filters=FILTERS)
    assert g.rewards == {"a": 1.0, "b": 0.0, "c": 0.0} and "crashed" not in g.dropped
    assert g.tree is not None and sorted(g.tree.episodes) == ["a", "b", "c"]
    m = rollout_metrics(RolloutBatch(groups=[g]))
    assert m["crashed_masked"] == 0.0 and m["episodes_crashed/claude-code"] == 1.0
    assert {f.name: f.default for f in dataclasses.fields(TreeGRPOConfig)}["crashed_episodes"] == "penalize"


def test_crashed_episodes_can_be_masked_and_are_counted() -> None:
    eps = [episode("a", 1.0), episode("b", 0.0, completion=(9,)), episode("c", 0.7, status="crashed", completion=(5, 6))]
    g = make_group("toy/t", "claude-code", eps, filters=FILTERS, crashed="mask")
    assert set(g.rewards) == {"a", "b"} and g.dropped["crashed"] == ["c"]  # neither baseline nor loss
    assert g.tree is not None and sorted(g.tree.episodes) == ["a", "b"]
    m = rollout_metrics(RolloutBatch(groups=[g]))
    assert m["crashed_masked"] == 1.0 and m["crashed_masked/claude-code"] == 1.0 and m["episodes_crashed/claude-code"] == 1.0
    assert m["reward"] == 0.5


def test_a_harness_stopped_at_a_sandbox_limit_trains_on_its_verdict() -> None:
    """Memory, pids, output floods are the agent's doing: masked, they would be a way out of a failing grade."""
    stopped = episode("c", 0.0, status="crashed", completion=(5, 6))
    stopped.limit_hit = "memory"
    for crashed in ("mask", "penalize"):
        g = make_group("toy/t", "custom", [episode("a", 1.0), stopped], filters=FILTERS, crashed=crashed, crashed_reward=-1.0)
        assert g.rewards == {"a": 1.0, "c": 0.0} and "crashed" not in g.dropped


def test_crashed_episodes_can_be_penalised_instead() -> None:
    eps = [episode("a", 1.0), episode("c", 0.7, status="crashed", completion=(5, 6))]
    g = make_group("toy/t", "custom", eps, filters=FILTERS, crashed="penalize", crashed_reward=-1.0)
    assert g.rewards == {"a": 1.0, "c": -1.0} and sorted(g.tree.episodes) == ["a", "c"] and "crashed" not in g.dropped
    assert rollout_metrics(RolloutBatch(groups=[g]))["crashed_masked"] == 0.0
    with pytest.raises(ConfigError, match="crashed_episodes"):
        make_group("toy/t", "custom", eps, filters=FILTERS, crashed="drop")  # type: ignore[arg-type]


def test_a_crashed_episode_stays_crashed_through_the_attempt_record(tmp_path) -> None:
    """The executor stores a crash as status 'error'; the trainer must still see 'crashed' to mask or penalise it."""
    from clawgym_env.runner import AttemptJob, episode_to_attempt
    from trainers.rollout_stream import episode_from_attempt

    for status, stored in (("crashed", "error"), ("error", "error"), ("completed", "passed")):
        ep = episode("c", 1.0, status=status)
        ep.limit_hit = "pids" if status == "crashed" else None
        rec = episode_to_attempt(AttemptJob(task_id="toy/t", harness="custom", attempt=0), ep, 0.5, started="", elapsed=1.0)
        assert rec.status == stored
        back = episode_from_attempt(rec, tmp_path / "none.jsonl")
        assert back.status == status and back.limit_hit == ep.limit_hit
