"""Tree GRPO: the group baseline ``(R_i - mean_g) / (std_g + eps)`` on every trainable token of
rollout i, computed on the packed prefix tree of the group (each shared token forwarded once).
With ``branching``, a group is a tree of root rollouts and their branches, and each loss token
gets its node's TreeRL step advantage instead (``tree_advantages``).

Ours, on TRL's definitions: TRL 1.16's ``GRPOTrainer`` samples flat completions; here a group is
``num_generations`` real harness episodes of one (task, harness) pair, and the loop lives in
``trainers.core.engine.TreeTrainerBase``. The advantage formula, ``scale_rewards`` and the loss
normalisations are TRL's (``trainers/core/losses.py``).
"""

from __future__ import annotations

import torch

from trainers.core.engine import PackSlot, TreeTrainerBase
from trainers.core.losses import group_advantages
from trainers.rollout import RolloutBatch

__all__ = ["TreeGRPOTrainer", "rollout_advantages", "tree_advantages"]


def rollout_advantages(batch: RolloutBatch, scale_rewards: str = "group") -> dict[tuple[int, str], float]:
    """(group index, session id) -> GRPO advantage, over each group's full baseline."""
    keys: list[tuple[int, str]] = []
    rewards: list[float] = []
    groups: list[int] = []
    for gi, g in enumerate(batch.groups):
        for sid, r in g.rewards.items():
            keys.append((gi, sid))
            rewards.append(r)
            groups.append(gi)
    if not keys:
        return {}
    adv = group_advantages(torch.tensor(rewards), torch.tensor(groups), scale_rewards=scale_rewards)  # type: ignore[arg-type]  # TRL's literal, checked by the config
    return dict(zip(keys, adv.tolist(), strict=True))


def tree_advantages(slots: list[PackSlot], batch: RolloutBatch, scale_rewards: str = "group", eps: float = 1e-4) -> dict[str, float]:
    """Branched groups: each loss token's TreeRL step advantage, scaled like GRPO's (group or batch reward std).

    The step advantage is linear in the rewards and blind to their mean, so dividing it by the
    std is computing it on GRPO's standardised rewards; a group of one leaf has no baseline (0).
    """
    if scale_rewards in ("True", "False"):
        scale_rewards = "group" if scale_rewards == "True" else "none"
    every = torch.tensor([r for g in batch.groups for r in g.rewards.values()], dtype=torch.float32)
    batch_std = float(every.std()) if every.numel() > 1 else 0.0
    for s in slots:
        rewards = torch.tensor(list(s.group.rewards.values()), dtype=torch.float32)
        adv = s.extra["step_advantage"]
        if rewards.numel() < 2:
            adv = torch.zeros_like(adv)
        elif scale_rewards == "group":
            adv = adv / (float(rewards.std()) + eps)
        elif scale_rewards == "batch":
            adv = adv / (batch_std + eps)
        s.advantages = adv
    every_adv = torch.cat([s.advantages for s in slots if s.advantages is not None]) if slots else torch.zeros(0)
    return {"advantage/abs_mean": float(every_adv.abs().mean()) if every_adv.numel() else 0.0}


class TreeGRPOTrainer(TreeTrainerBase):
    """``TreeGRPOTrainer(config, model_path).train()``; ``train_step(batch)`` for a batch you collected."""

    def pair_advantages(self, slots: list[PackSlot], batch: RolloutBatch, rollouts: list[tuple[int, str]]) -> dict[str, float]:
        if self.config.branching:
            return tree_advantages(slots, batch, str(self.config.scale_rewards))
        adv = rollout_advantages(batch, str(self.config.scale_rewards))
        per_rollout = torch.tensor([adv[k] for k in rollouts], dtype=torch.float32)
        for s in slots:
            s.advantages = per_rollout[s.pair_rollout]
        return {"advantage/abs_mean": float(per_rollout.abs().mean()) if len(per_rollout) else 0.0}
