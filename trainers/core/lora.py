"""LoRA through peft with TRL's flags (``--use_peft --lora_r --lora_alpha --lora_dropout
--lora_target_modules --use_rslora``): only the adapter trains; rollouts get merged weights.

The merge is computed, not applied: ``W + scaling * B @ A`` per adapted layer
(``LoraLayer.get_delta_weight``) under the plain Hugging Face names, so the trainer's base
weights are never touched by a merge/unmerge round trip (which would drift them by rounding).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from trainers.core.weight_sync import PolicyWeights

if TYPE_CHECKING:
    from trainers.tree_grpo.config import TreeGRPOConfig

__all__ = ["add_adapter", "merged_state_dict", "merged_weights"]

ADAPTER = "default"


def add_adapter(model: Any, config: TreeGRPOConfig) -> Any:
    """``model`` wrapped by peft with a fresh LoRA adapter; every other parameter frozen."""
    from peft import LoraConfig, get_peft_model

    targets = list(config.lora_target_modules) if config.lora_target_modules else "all-linear"
    lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=targets, use_rslora=config.use_rslora, bias="none", task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


def merged_state_dict(peft_model: Any) -> dict[str, torch.Tensor]:
    """The base model's state dict with every adapter folded in, under the base model's own names."""
    from peft.tuners.lora import LoraLayer

    base = peft_model.get_base_model()
    deltas: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer) and ADAPTER in module.lora_A:
                deltas[f"{name}.weight"] = module.get_delta_weight(ADAPTER)
        out: dict[str, torch.Tensor] = {}
        for key, value in base.state_dict().items():
            if ".lora_" in key:
                continue
            plain = key.replace(".base_layer.", ".")
            out[plain] = value + deltas[plain].to(value.dtype) if plain in deltas else value
    return out


def merged_weights(peft_model: Any, tokenizer: Any) -> PolicyWeights:
    """What the weight sync sends for a LoRA policy: the merged full model."""

    def save(folder: Path) -> None:
        peft_model.get_base_model().save_pretrained(folder, state_dict=merged_state_dict(peft_model))
        tokenizer.save_pretrained(folder)

    return PolicyWeights(state_dict=lambda: merged_state_dict(peft_model), save_pretrained=save)
