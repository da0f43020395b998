"""TreeSFTConfig: TRL's SFTConfig read the tree way.

TRL fields keep their meaning: ``learning_rate``, ``lr_scheduler_type``, ``warmup_ratio``/``warmup_steps``,
``max_grad_norm``, ``adam_*``, ``weight_decay``, ``num_train_epochs`` / ``max_steps``, ``logging_steps``,
``output_dir``, ``seed``, ``report_to``. ``packing`` is always on (episodes are packed as prefix trees),
``max_length`` is the token budget of one pack, ``assistant_only_loss`` is always on (the loss covers the
policy's own sampled tokens, never prompt or tool-result tokens), ``loss_type`` must be "nll".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import SFTConfig

from clawgym_env.errors import ConfigError

__all__ = ["TreeSFTConfig"]


@dataclass
class TreeSFTConfig(SFTConfig):
    """Supervised fine-tuning on prefix trees of captured harness episodes."""

    dataset_path: str = field(default="", metadata={"help": "Expert dataset folder (datasets.save_to_disk) from trainers.tree_sft.expert."})
    harness: str | None = field(default=None, metadata={"help": "Comma-separated harnesses to train on (default: all in the dataset)."})
    packs_per_step: int = field(default=2, metadata={"help": "Packs whose gradients are summed into one optimizer step."})
    branch_tokens: int = field(
        default=4096, metadata={"help": "Pack budget beyond a harness's first prompt (the shared trunk); max_length caps the total."}
    )
    detach_prefix: bool = field(
        default=True, metadata={"help": "Forward the trunk every token of a pack shares once, without gradient (see tree_sft.forward)."}
    )
    frozen_layers: int = field(
        default=0,
        metadata={"help": "Freeze the embeddings (and a tied head) and the bottom N decoder layers: backward stops above them (CPU)."},
    )
    # TRL's LoRA flags (trl.ModelConfig); the adapter goes on the decoder layers above frozen_layers
    use_peft: bool = field(default=False, metadata={"help": "Train a LoRA adapter (peft) instead of the weights; saved alone."})
    lora_r: int = field(default=8, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=16, metadata={"help": "LoRA alpha (scaling alpha / r)."})
    lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout (0: the trained policy samples as it trained)."})
    lora_target_modules: list[str] | None = field(default=None, metadata={"help": "Modules to adapt (default: every linear layer)."})
    use_rslora: bool = field(default=False, metadata={"help": "Rank-stabilised LoRA scaling."})
    # TRL defaults changed for tree packs on CPU-sized models
    max_length: int | None = field(default=16384, metadata={"help": "Token budget of one packed tree."})
    packing: bool = field(default=True, metadata={"help": "Always true: episodes are packed as prefix trees."})
    assistant_only_loss: bool = field(default=True, metadata={"help": "Always true: loss on the policy's sampled tokens only."})
    logging_steps: float = field(default=1, metadata={"help": "Log every X steps."})
    report_to: None | str | list[str] = field(default="none", metadata={"help": "'tensorboard', 'wandb' or 'none'."})

    def __post_init__(self) -> None:
        if self.bf16 is None:
            import torch

            self.bf16 = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
        if not self.dataset_path:
            raise ConfigError("TreeSFTConfig.dataset_path is empty; set --dataset_path to an expert dataset folder")
        if not self.packing or not self.assistant_only_loss:
            raise ConfigError("tree SFT always packs trees and trains on policy tokens only; leave packing and assistant_only_loss true")
        if self.loss_type != "nll":
            raise ConfigError(f"loss_type={self.loss_type!r}: tree SFT implements 'nll' only; set --loss_type nll")
        if self.max_length is None or self.max_length < 256:
            raise ConfigError(f"max_length={self.max_length}: set a pack budget of at least 256 tokens")
        if self.frozen_layers < 0:
            raise ConfigError(f"frozen_layers={self.frozen_layers}: set 0 (train every weight) or more")
        if self.packs_per_step < 1:
            raise ConfigError(f"packs_per_step={self.packs_per_step}: set at least 1")
        super().__post_init__()

    @property
    def harness_names(self) -> list[str]:
        """Harnesses to keep; empty means all."""
        return [h.strip() for h in (self.harness or "").split(",") if h.strip()]
