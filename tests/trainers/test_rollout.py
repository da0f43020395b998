"""Rollout bookkeeping without sandboxes: mix sampling, error/stale drops, filters, zero variance."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from clawgym_env.capture.records import CallRecord
from clawgym_env.episode import EpisodeResult
from clawgym_env.errors import ConfigError
from trainers.rollout import (
    RolloutBatch,
    make_group,
    rollout_metrics,
    sample_pairs,
    tree_filters,
)

FILTERS = tree_filters(drop_retries=True, max_leaves=None, exclude_subagents=False)


def episode(sid: str, score: float, *, status: str = "completed", version: int = 0, completion: tuple[int, ...] = (7, 8)) -> EpisodeResult:
    call = CallRecord(session_id=sid, call_index=0, dialect="openai-chat", prompt_ids=[1, 2, 3], completion_ids=list(completion),
                      logprobs=[-0.5] * len(completion), policy_version=version)
    return EpisodeResult(session_id=sid, task_id="toy/t", harness="custom", status=status, score=score, calls=[call])  # type: ignore[arg-type]


def test_mix_weights_set_the_harness_frequencies() -> None:
    pairs = sample_pairs(["t1", "t2"], ["custom", "claude-code"], [3.0, 1.0], 4000, random.Random(0))  # type: ignore[list-item]
    counts = Counter(h for _, h in pairs)
    assert 0.72 < counts["custom"] / 4000 < 0.78
    assert {t for t, _ in pairs} == {"t1", "t2"}
    assert all(h == "custom" for _, h in sample_pairs(["t"], ["custom", "x"], [1.0, 0.0], 50, random.Random(1)))  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="one weight per harness"):
        sample_pairs(["t"], ["a", "b"], [1.0], 1, random.Random(0))  # type: ignore[list-item]


def test_errors_leave_the_baseline_and_stale_rollouts_leave_the_tree() -> None:
    eps = [episode("a", 1.0), episode("b", 0.0, completion=(9,)), episode("c", 0.0, status="error"), episode("d", 0.5, version=0)]
    g = make_group("toy/t", "custom", eps, filters=FILTERS, policy_version=2, max_policy_lag=1)
    assert set(g.rewards) == {"a", "b", "d"}  # the infrastructure failure says nothing about the policy
    assert g.dropped["error"] == ["c"] and sorted(g.dropped["stale"]) == ["a", "b", "d"]
    assert g.tree is None
    fresh = make_group("toy/t", "custom", eps, filters=FILTERS, policy_version=1, max_policy_lag=1)
    assert fresh.tree is not None and sorted(fresh.tree.episodes) == ["a", "b", "d"]
    assert fresh.versions == {0} and fresh.statuses == {"completed": 3, "error": 1}
    # a and d sampled the same ids: one shared token path, two samplers
    assert fresh.tree.num_trainable == 3


def test_zero_variance_and_metrics_per_harness() -> None:
    flat = make_group("toy/t", "custom", [episode("a", 1.0), episode("b", 1.0)], filters=FILTERS, policy_version=0, max_policy_lag=0)
    varied = make_group("toy/t", "claude-code", [episode("c", 1.0), episode("d", 0.0)], filters=FILTERS, policy_version=0,
                        max_policy_lag=0)
    assert flat.zero_variance and not varied.zero_variance
    m = rollout_metrics(RolloutBatch(groups=[varied], skipped=[(flat, "zero reward variance")]))
    assert m["reward/custom"] == 1.0 and m["reward/claude-code"] == 0.5 and m["reward"] == 0.75
    assert m["frac_reward_zero_std"] == 0.5 and m["groups_skipped"] == 1.0
