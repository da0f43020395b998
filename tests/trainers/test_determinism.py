"""A seeded CPU run replays: the same seed gives the same rollouts, rewards and losses step after
step, and a run resumed from a checkpoint continues exactly as the uninterrupted one (the sampler's
RNG, which draws the session ids that seed every call's sampling, is in the checkpoint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainers.conftest import make_config
from trainers.tree_grpo.trainer import TreeGRPOTrainer

pytestmark = pytest.mark.sandbox

EXACT = ("reward", "trainable_tokens")  # what was sampled and how it scored: bit for bit
CLOSE = ("loss", "grad_norm")  # through the rollout logprobs, which vary ~1e-8 with the backend's batch composition


def same(x: dict[str, float], y: dict[str, float]) -> bool:
    return all(x[k] == y[k] for k in EXACT) and all(x[k] == pytest.approx(y[k], rel=1e-5, abs=1e-7) for k in CLOSE)


def run(tiny_path: Path, out: Path, steps: int, resume: Path | None = None, save_steps: int = 0) -> list[dict[str, float]]:
    cfg = make_config(out, max_steps=3, learning_rate=1e-2, save_steps=save_steps, max_concurrent_episodes=8)
    trainer = TreeGRPOTrainer(cfg, tiny_path, resume_from_checkpoint=resume)
    try:
        return trainer.train(steps=steps)
    finally:
        trainer.close()


def test_same_seed_same_curve_and_resume_continues_it(tiny_path: Path, tmp_path: Path) -> None:
    a = run(tiny_path, tmp_path / "a", 2, save_steps=1)
    b = run(tiny_path, tmp_path / "b", 2)
    assert len(a) == len(b) == 2 and all(same(x, y) for x, y in zip(a, b, strict=True))
    assert a[0]["trainable_tokens"] != a[1]["trainable_tokens"] or a[0]["reward"] != a[1]["reward"]  # two different batches
    resumed = run(tiny_path, tmp_path / "c", 1, resume=tmp_path / "a" / "checkpoint-1")
    assert same(resumed[-1], a[1])
