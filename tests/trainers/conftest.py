"""Shared trainer fixtures: the tiny model, the toy-rl suite, configs, and one real rollout batch.

The real batch is sampled once per module through the custom harness in bwrap sandboxes with the
in-process HF backend, so every test that trains on it trains on real captures.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harnesses.custom import CustomLoop

SUITE = Path(__file__).resolve().parents[2] / "trainers" / "suites" / "toy-rl"


class TerseLoop(CustomLoop):
    """A second real harness for mix tests: the custom loop under its own name, one turn at most."""

    name = "custom-terse"

    def __init__(self) -> None:
        super().__init__(max_turns=1, max_tokens=16)


@pytest.fixture(scope="session")
def tiny_path() -> Path:
    from clawgym_env.models import tiny_model_path

    return tiny_model_path()


def make_config(out: Path, cls: Any = None, **kw: Any) -> Any:
    """A TreeGRPOConfig (or ``cls``) sized for CPU tests."""
    from trainers.tree_grpo.config import TreeGRPOConfig

    base: dict[str, Any] = {
        "output_dir": str(out),
        "suite": str(SUITE),
        "harness": "custom",
        "max_completion_length": 16,
        "learning_rate": 1e-3,
        "max_steps": 4,
        "save_steps": 0,
        "num_generations": 4,
        "pairs_per_step": 2,
        "loss_type": "grpo",
        "seed": 0,
    }
    base.update(kw)
    return (cls or TreeGRPOConfig)(**base)


@pytest.fixture(scope="module")
def real_batch(tiny_path: Path) -> Iterator[Any]:
    """One step's rollouts (2 groups x 4 episodes of the toy tasks, custom harness, bwrap), version 0."""
    from clawgym_env._sync import run_sync
    from clawgym_env.proxy.backends.hf import HFBackend
    from clawgym_env.task import load_suite
    from trainers.rollout import collect, tree_filters

    backend = HFBackend(tiny_path, seed=0)
    suite = load_suite(SUITE)
    batch = collect(
        [suite.get("say-short")],
        ["custom"],
        [1.0],
        backend,
        pairs_per_step=2,
        num_generations=4,
        rng=random.Random(0),
        filters=tree_filters(drop_retries=True, max_leaves=None, exclude_subagents=False),
        policy_version=0,
        skip_zero_variance=False,
        sampling={"max_tokens": 16, "temperature": 1.0},
    )
    yield batch
    run_sync(backend.aclose())
