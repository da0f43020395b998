"""Tree PPO: a value model, ``A_t = R - V(s_t)`` with gamma = lambda = 1, branches independent,
and a value warm-up before the first policy update.

TRL removed its PPO trainer in 1.13, so this is ours, built on the same pieces as tree GRPO
(engine, clipped loss, truncated importance weights, ``loss_type`` normalisation). ``s_t`` is the
prefix a token was sampled after: its value is read at the token's parent position in the packed
tree, so a prefix shared by several rollouts is valued once and regressed on each rollout's return
(one (token, rollout) pair each), which is what independent branches mean on a tree. With
``branching`` a token has one pair, regressed on its node's subtree mean return (the Monte Carlo
value the group's branches measured there): replayed prefixes are not counted once per branch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainers.core.engine import PackSlot, TreeTrainerBase
from trainers.core.losses import ppo_advantages, value_loss
from trainers.rollout import RolloutBatch
from trainers.tree_ppo.config import TreePPOConfig

__all__ = ["TreePPOTrainer", "ValueModel"]


class ValueModel(nn.Module):
    """The policy's transformer trunk (its own copy) and a linear head giving V at every position."""

    def __init__(self, model_path: str | Path, dtype: torch.dtype = torch.float32, attn_implementation: str = "sdpa") -> None:
        from transformers import AutoModel

        super().__init__()
        self.backbone = AutoModel.from_pretrained(model_path, dtype=dtype, attn_implementation=attn_implementation)
        self.head = nn.Linear(self.backbone.config.hidden_size, 1, dtype=dtype)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @property
    def config(self) -> Any:
        return self.backbone.config

    def forward(self, **inputs: Any) -> torch.Tensor:
        """Values ``[N]`` of a packed sequence (batch of one), float32."""
        hidden = self.backbone(**inputs).last_hidden_state[0]
        return self.head(hidden).squeeze(-1).float()


class TreePPOTrainer(TreeTrainerBase):
    """``TreePPOTrainer(config, model_path).train()``: value warm-up, then PPO steps."""

    config: TreePPOConfig

    def setup_models(self) -> None:
        dtype = next(self.model.parameters()).dtype
        attn = getattr(self.model.config, "_attn_implementation", None) or "sdpa"
        self.value_model = ValueModel(self.model_path, dtype, attn).to(self.device)  # same mask form as the policy
        self.value_optimizer = torch.optim.AdamW(self.value_model.parameters(), lr=self.config.value_learning_rate)

    def policy_enabled(self) -> bool:
        return self.step >= self.config.value_warmup_steps

    def pair_advantages(self, slots: list[PackSlot], batch: RolloutBatch, rollouts: list[tuple[int, str]]) -> dict[str, float]:
        """Fit V on this batch's returns (one AdamW step) and set ``A = R - V_old(s_t)`` per pair."""
        c = self.config
        returns = torch.tensor([batch.groups[gi].rewards[sid] for gi, sid in rollouts], dtype=torch.float32)
        counts = torch.zeros(len(rollouts), dtype=torch.long)
        for s in slots:
            counts.index_add_(0, s.pair_rollout, torch.ones_like(s.pair_rollout))
        self.value_optimizer.zero_grad(set_to_none=True)
        total, v_loss = float(counts.sum().clamp(min=1)), 0.0
        for s in slots:
            dtype = next(self.value_model.parameters()).dtype
            values = self.value_model(**s.pack.model_inputs(self.mask_kind, dtype=dtype, device=self.device))  # type: ignore[arg-type]  # a dtype, not a str
            v = values[s.pack.prev_index[s.pair_token].to(values.device)]
            ret = (s.extra["node_value"] if c.branching else returns[s.pair_rollout]).to(v.device)
            old = s.extra.get("old_values", v.detach())
            s.extra["old_values"] = old
            loss = c.vf_coef * value_loss(v, ret, torch.full_like(v, 1.0 / total), old_values=old, clip=c.cliprange_value)
            loss.backward()
            v_loss += float(loss.detach())
            s.advantages = ppo_advantages(ret, old).cpu()
        grad_norm = torch.nn.utils.clip_grad_norm_(list(self.value_model.parameters()), c.max_grad_norm)
        self.value_optimizer.step()
        all_adv = torch.cat([s.advantages for s in slots if s.advantages is not None])
        metrics = {
            "value_loss": v_loss,
            "value_grad_norm": float(grad_norm),
            "advantage/abs_mean": float(all_adv.abs().mean()),
            "value/mean": float(torch.cat([s.extra["old_values"].cpu() for s in slots]).mean()),
            "value_warmup": float(not self.policy_enabled()),
        }
        if c.whiten_advantages and all_adv.numel() > 1:
            mean, std = all_adv.mean(), all_adv.std()
            for s in slots:
                s.advantages = (s.advantages - mean) / (std + 1e-8)  # type: ignore[operator]  # set by the loss pieces before
        return metrics

    def extra_state(self) -> dict[str, Any]:
        return {"value_model": self.value_model.state_dict(), "value_optimizer": self.value_optimizer.state_dict()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if "value_model" in state:
            self.value_model.load_state_dict(state["value_model"])
            self.value_optimizer.load_state_dict(state["value_optimizer"])
