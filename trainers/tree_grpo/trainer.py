"""Tree GRPO: the group baseline ``(R_i - mean_g) / (std_g + eps)`` on every trainable token of
rollout i, computed on the packed prefix tree of the group (each shared token forwarded once).

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

__all__ = ["TreeGRPOTrainer", "rollout_advantages"]


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
    adv = group_advantages(torch.tensor(rewards), torch.tensor(groups), scale_rewards=scale_rewards)  # type: ignore[arg-type]
    return dict(zip(keys, adv.tolist(), strict=True))


class TreeGRPOTrainer(TreeTrainerBase):
    """``TreeGRPOTrainer(config, model_path).train()``; ``train_step(batch)`` for a batch you collected."""

    def pair_advantages(self, slots: list[PackSlot], batch: RolloutBatch, rollouts: list[tuple[int, str]]) -> dict[str, float]:
        adv = rollout_advantages(batch, str(self.config.scale_rewards))
        per_rollout = torch.tensor([adv[k] for k in rollouts], dtype=torch.float32)
        for s in slots:
            s.advantages = per_rollout[s.pair_rollout]
        return {"advantage/abs_mean": float(per_rollout.abs().mean()) if len(per_rollout) else 0.0}
