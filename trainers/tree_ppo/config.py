"""TreePPOConfig: the tree GRPO fields plus the value model and its warm-up.

PPO here uses the same sampling, filters, clipping, importance weights and ``loss_type``
normalisation as tree GRPO; only the advantage differs: ``A_t = R - V(s_t)`` from a value model
instead of the group baseline (gamma = lambda = 1, each branch of the tree its own trajectory).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clawgym_env.errors import ConfigError
from trainers.tree_grpo.config import TreeGRPOConfig

__all__ = ["TreePPOConfig"]


@dataclass
class TreePPOConfig(TreeGRPOConfig):
    """Tree PPO; groups still exist (they batch rollouts of one pair) but do not set the baseline."""

    value_warmup_steps: int = field(default=2, metadata={"help": "Steps that train only the value model before any policy update."})
    value_learning_rate: float = field(default=1e-4, metadata={"help": "AdamW learning rate of the value model."})
    vf_coef: float = field(default=1.0, metadata={"help": "Weight of the value loss."})
    cliprange_value: float | None = field(
        default=None, metadata={"help": "Clip value updates around the old values (PPO2); None disables it."}
    )
    whiten_advantages: bool = field(
        default=True, metadata={"help": "Normalise R - V(s) to zero mean and unit std over the batch's sampled tokens."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.value_warmup_steps < 0:
            raise ConfigError(f"value_warmup_steps={self.value_warmup_steps}: set 0 (no warm-up) or a positive count")
        if self.value_learning_rate <= 0 or self.vf_coef <= 0:
            raise ConfigError("value_learning_rate and vf_coef must be positive; set e.g. value_learning_rate=1e-4, vf_coef=1.0")
        if self.cliprange_value is not None and self.cliprange_value <= 0:
            raise ConfigError(f"cliprange_value={self.cliprange_value}: set a positive range or None")
