"""Tree PPO on real rollouts: value warm-up leaves the policy alone, then A = R - V(s_t) trains it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainers.conftest import make_config
from trainers.tree_ppo.config import TreePPOConfig
from trainers.tree_ppo.trainer import TreePPOTrainer

pytestmark = pytest.mark.sandbox


def test_value_warmup_then_policy_step(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    cfg = make_config(tmp_path, TreePPOConfig, value_warmup_steps=3, value_learning_rate=3e-3, max_steps=10)
    trainer = TreePPOTrainer(cfg, tiny_path)
    policy0 = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    losses = []
    for _ in range(3):
        m = trainer.train_step(copy.deepcopy(real_batch))
        trainer.step += 1
        assert m["value_warmup"] == 1.0 and m["policy_version"] == 0.0 and "loss" not in m
        assert m["mismatch"] < 1e-3  # measured during warm-up too
        losses.append(m["value_loss"])
    assert losses[-1] < losses[0]  # V regresses toward the returns
    assert all(torch.equal(v, trainer.model.state_dict()[k]) for k, v in policy0.items())
    m = trainer.train_step(copy.deepcopy(real_batch))
    assert m["value_warmup"] == 0.0 and m["policy_version"] == 1.0 and m["grad_norm"] > 0
    assert m["mismatch"] < 1e-3 and m["value/mean"] != 0.0
    assert any(not torch.equal(v, trainer.model.state_dict()[k]) for k, v in policy0.items())


def test_advantage_is_return_minus_value_per_pair(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    cfg = make_config(tmp_path, TreePPOConfig, whiten_advantages=False)
    trainer = TreePPOTrainer(cfg, tiny_path)
    with torch.no_grad():
        trainer.value_model.head.bias.fill_(0.25)  # V = 0.25 everywhere before the update
    slots, rollouts = trainer.slots(real_batch)
    trainer.pair_advantages(slots, real_batch, rollouts)
    for s in slots:
        returns = torch.tensor([real_batch.groups[rollouts[r][0]].rewards[rollouts[r][1]] for r in s.pair_rollout.tolist()])
        assert s.advantages is not None and torch.allclose(s.advantages, returns - 0.25, atol=1e-6)


def test_ppo_checkpoint_keeps_the_value_model(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    cfg = make_config(tmp_path, TreePPOConfig, value_warmup_steps=1)
    a = TreePPOTrainer(cfg, tiny_path)
    a.train_step(copy.deepcopy(real_batch))
    a.step = 1
    b = TreePPOTrainer(cfg, tiny_path, resume_from_checkpoint=a.save_checkpoint())
    for (k, va), vb in zip(a.value_model.state_dict().items(), b.value_model.state_dict().values(), strict=True):
        assert torch.equal(va, vb), k
    assert b.policy_enabled()
