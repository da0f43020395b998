"""Asynchronous rollouts through real episodes (custom harness, bwrap, in-process HF backend, tiny model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainers.conftest import make_config
from trainers.tree_grpo.trainer import TreeGRPOTrainer

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]


def test_async_run_trains_on_groups_at_most_max_staleness_old(tiny_path: Path, tmp_path: Path) -> None:
    cfg = make_config(tmp_path, async_rollouts=True, max_staleness=1, max_steps=4, pairs_per_step=1, num_generations=2, learning_rate=1e-2)
    trainer = TreeGRPOTrainer(cfg, tiny_path)
    try:
        history = trainer.train()
        hist = dict(trainer.rollouts.staleness)
    finally:
        trainer.close()
    assert [m["policy_version"] for m in history] == [1.0, 2.0, 3.0, 4.0]
    assert set(hist) <= {0, 1} and sum(hist.values()) == 4  # one group per step, none older than 1 version
    assert all(m["staleness/mean"] <= 1.0 and m["policy_lag/max"] <= 1.0 for m in history)
    stale = [m for m in history[1:] if m["staleness/mean"] > 0]
    # a group sampled (partly) by the previous weights: its logprobs differ from the trainer's, corrected by the IS weights
    assert all(m["mismatch"] > 1e-6 for m in stale)


def test_async_run_with_the_policy_in_a_child_process(tiny_path: Path, tmp_path: Path) -> None:
    """--rollout_process, K = 2: two steps of groups sample ahead in the child; none trains older than 2 versions."""
    cfg = make_config(
        tmp_path,
        async_rollouts=True,
        max_staleness=2,
        max_steps=4,
        pairs_per_step=1,
        num_generations=2,
        learning_rate=1e-2,
        rollout_process=True,
    )
    trainer = TreeGRPOTrainer(cfg, tiny_path)
    try:
        history = trainer.train()
        hist = dict(trainer.rollouts.staleness)
        child = trainer.rollouts.backend
    finally:
        trainer.close()
    assert type(child).__name__ == "ChildHFBackend" and not child._proc.is_alive()
    assert [m["policy_version"] for m in history] == [1.0, 2.0, 3.0, 4.0]
    assert set(hist) <= {0, 1, 2} and sum(hist.values()) == 4 and max(hist) >= 1  # sampled ahead, within K
    assert history[0]["mismatch"] < 1e-5  # version 0 in the child equals the trainer's
    assert all(m["mismatch"] > 1e-6 for m in history[1:] if m["staleness/mean"] > 0)  # older weights, IS-corrected
