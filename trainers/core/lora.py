"""LoRA through peft with TRL's flags (``--use_peft --lora_r --lora_alpha --lora_dropout
--lora_target_modules --use_rslora``): only the adapter trains; rollouts get merged weights.

A run may also start from a saved adapter (``model_name_or_path`` an adapter folder, whose
``adapter_config.json`` names its base: ``clawgym_env.models.adapter``): the adapter keeps training,
so SFT, then RL on top of it, end as one adapter of the same shape, loadable as
``--model hf:BASE?adapter=PATH``. Saved adapters record their base portably (``smollm2``, not a cache path).

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
    from trainers.tree_sft.config import TreeSFTConfig

    LoraFlags = TreeGRPOConfig | TreeSFTConfig
    """Either trainer's config: both carry TRL's LoRA flags (use_peft, lora_r, lora_alpha, ...)."""

__all__ = [
    "add_adapter",
    "load_base",
    "load_reference",
    "merged_state_dict",
    "merged_weights",
    "new_adapter",
    "save_adapter",
    "tokenizer_folder",
    "with_adapter",
]

ADAPTER = "default"


def add_adapter(model: Any, config: LoraFlags, layers: list[int] | None = None) -> Any:
    """``model`` wrapped by peft with a fresh LoRA adapter (on decoder ``layers``, default all); every other parameter frozen."""
    return new_adapter(
        model,
        r=config.lora_r,
        alpha=config.lora_alpha,
        dropout=config.lora_dropout,
        targets=config.lora_target_modules,
        layers=layers,
        rslora=config.use_rslora,
    )


def new_adapter(
    model: Any,
    *,
    r: int,
    alpha: float,
    dropout: float = 0.0,
    targets: list[str] | None = None,
    layers: list[int] | None = None,
    rslora: bool = False,
) -> Any:
    """``model`` wrapped by peft with a fresh LoRA adapter on ``targets`` (default every linear layer) of the decoder
    layers ``layers`` (default all); every other parameter frozen."""
    from peft import LoraConfig, get_peft_model

    if not targets and layers is not None:  # peft's "all-linear" cannot be narrowed to layers: name the linears
        blocks = model.get_decoder().layers
        targets = sorted({n.rsplit(".", 1)[-1] for n, m in blocks.named_modules() if isinstance(m, torch.nn.Linear)})
    lora = LoraConfig(
        r=r,
        lora_alpha=alpha,  # type: ignore[arg-type]  # peft's stub says int; it scales by a float
        lora_dropout=dropout,
        target_modules=list(targets) if targets else "all-linear",
        layers_to_transform=list(layers) if layers is not None else None,
        use_rslora=rslora,
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def load_base(path: str | Path, **load: Any) -> Any:
    """The full model a run starts from: ``path`` itself, or an adapter folder's base (``from_pretrained(**load)``)."""
    from transformers import AutoModelForCausalLM

    from clawgym_env.models.adapter import adapter_base, is_adapter

    return AutoModelForCausalLM.from_pretrained(adapter_base(path) if is_adapter(path) else path, **load)


def with_adapter(model: Any, path: str | Path, config: LoraFlags, layers: list[int] | None = None) -> Any:
    """``load_base``'s model ready to train: an adapter folder's adapter trainable on it, a fresh adapter with
    ``--use_peft`` (on decoder ``layers``, default all), or the model itself."""
    from clawgym_env.errors import ConfigError
    from clawgym_env.models.adapter import is_adapter

    if is_adapter(path):
        if not config.use_peft:
            raise ConfigError(f"{path} is a LoRA adapter: training it needs --use_peft (the adapter keeps training)")
        from peft import PeftModel

        from clawgym_env.models.adapter import adapter_base

        trained = PeftModel.from_pretrained(model, Path(path).expanduser(), is_trainable=True)
        # the local folder, not a portable name: peft's own saves (checkpoints) look the base up by this name
        trained.peft_config[ADAPTER].base_model_name_or_path = str(adapter_base(path))
        return trained
    return add_adapter(model, config, layers) if config.use_peft else model


def load_reference(path: str | Path, **load: Any) -> Any:
    """The frozen model ``path`` names (an adapter merged into its base), for a KL term."""
    from clawgym_env.models.adapter import adapter_base, is_adapter, load_merged

    return load_merged(adapter_base(path), path, **load) if is_adapter(path) else load_merged(path, None, **load)


def tokenizer_folder(path: str | Path) -> Path:
    """Where ``path``'s tokenizer is: the folder itself, or an adapter folder's base when it holds none."""
    from clawgym_env.models.adapter import adapter_base, is_adapter

    p = Path(path).expanduser()
    if is_adapter(p) and not (p / "tokenizer_config.json").is_file():
        return adapter_base(p)
    return p


def save_adapter(peft_model: Any, folder: Path, base: str | Path) -> Path:
    """Save only the adapter (``adapter_config.json`` + weights) into ``folder``, its base recorded as ``base_name(base)``
    (written after peft's save, which would otherwise look that name up as a hub id)."""
    import json

    from clawgym_env.models.adapter import ADAPTER_CONFIG, base_name

    peft_model.save_pretrained(folder, save_embedding_layers=False)
    cfg_file = Path(folder) / ADAPTER_CONFIG
    cfg = json.loads(cfg_file.read_text())
    cfg["base_model_name_or_path"] = base_name(base)
    cfg_file.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    (Path(folder) / "README.md").unlink(missing_ok=True)  # peft's model card template: nothing in it is ours
    return folder


def merged_state_dict(peft_model: Any) -> dict[str, torch.Tensor]:
    """The base model's state dict with every adapter folded in, under the base model's own names."""
    from peft.tuners.lora import LoraLayer

    base = peft_model.get_base_model()
    deltas: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer) and ADAPTER in module.lora_A:
                deltas[f"{name}.weight"] = module.get_delta_weight(ADAPTER)  # type: ignore[attr-defined]  # on every concrete LoraLayer
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
