"""Training rollouts through the Ray executor: a 2-node local cluster (2 raylets, loopback only)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.trainers.conftest import make_config
from trainers.tree_grpo.trainer import TreeGRPOTrainer

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

POLICY = Path(__file__).parent / "fixtures" / "toy_policy.yaml"


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[str]:
    """Two raylets on this machine (``ray.cluster_utils.Cluster``: only its own processes are stopped)."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    assert len(cluster.list_all_nodes()) == 2
    try:
        yield cluster.address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def run(tmp: Path, tiny: Path, **kw: Any) -> tuple[list[dict[str, float]], TreeGRPOTrainer]:
    cfg = make_config(tmp, tasks="say-short,say-digits", pairs_per_step=2, num_generations=2, max_steps=2, max_concurrent_episodes=2, **kw)
    trainer = TreeGRPOTrainer(cfg, tiny)
    try:
        return trainer.train(), trainer
    finally:
        trainer.close()


def test_ray_rollouts_match_local_rewards_with_a_scripted_policy(two_nodes: str, tiny_path: Path, tmp_path: Path) -> None:
    """Same fixed policy, same seeds: the Ray run sees the same groups and rewards as the local one.

    A scripted policy's tokens are re-tokenized text, never trained on (exact tokens only), so its
    steps are skipped; ``test_ray_workers_take_the_trainers_weights`` trains through Ray."""
    spec = f"scripted:{POLICY}?tokenizer={tiny_path}"
    local, _ = run(tmp_path / "local", tiny_path, rollout_backend=spec)
    remote, trainer = run(tmp_path / "ray", tiny_path, rollout_backend=spec, executor="ray", ray_address=two_nodes)
    for a, b in zip(local, remote, strict=True):
        assert b["reward"] == pytest.approx(a["reward"], abs=1e-9)
        assert b["reward/custom"] == pytest.approx(a["reward/custom"], abs=1e-9)
        assert b["groups_trained"] == a["groups_trained"] == 2.0
        assert b["skipped_step"] == a["skipped_step"] == 1.0 and b["trainable_tokens"] == 0.0
    assert 0 < remote[0]["reward"] < 1  # the two tasks score the fixed replies differently


def test_ray_workers_take_the_trainers_weights(two_nodes: str, tiny_path: Path, tmp_path: Path) -> None:
    """hf policy on every node: after step 1 the nodes sample with version 1, so lag stays 0 and mismatch ~0."""
    history, _ = run(tmp_path / "hf", tiny_path, executor="ray", ray_address=two_nodes, learning_rate=1e-2)
    assert [m["policy_version"] for m in history] == [1.0, 2.0]
    assert history[1]["policy_lag/max"] == 0.0 and history[1]["groups_stale"] == 0.0
    assert history[1]["mismatch"] < 1e-3  # the nodes' backends hold the updated weights
