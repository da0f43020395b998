"""LoRA adapters as policies: a small trained part saved apart from the base model it was trained on.

Why: a trained SmolLM2 is 540 MB of fp32 weights, its LoRA adapter a few MB, so the adapter is what
an experiment commits and what anyone loads in seconds on top of the base model
(``--model hf:smollm2?adapter=PATH``, or ``hf:PATH`` for an adapter folder, whose
``adapter_config.json`` names its base). The adapter is merged into the base weights once at load
(``merge_and_unload``): serving it then costs what serving the base costs.

The base is recorded portably: ``smollm2``, ``tiny`` and ``tiny-moe`` name the models ClawGym builds
itself (``clawgym_env.models``), anything else is a folder path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError

__all__ = ["ADAPTER_CONFIG", "BUILT_IN", "adapter_base", "base_name", "is_adapter", "load_merged", "resolve_base"]

ADAPTER_CONFIG = "adapter_config.json"
BUILT_IN = ("smollm2", "tiny", "tiny-moe")
"""Base names resolved to the models ClawGym builds locally (no hub)."""


def is_adapter(path: str | Path) -> bool:
    """A peft adapter folder: ``adapter_config.json`` and no full model (``config.json``)."""
    p = Path(path).expanduser()
    return (p / ADAPTER_CONFIG).is_file() and not (p / "config.json").is_file()


def resolve_base(name: str) -> Path:
    """The folder a base name means: a built-in name (``BUILT_IN``) or a model folder path."""
    from clawgym_env import models

    if name == "smollm2":
        return models.default_model_path()
    if name == "tiny":
        return models.tiny_model_path()
    if name == "tiny-moe":
        return models.tiny_moe_model_path()
    path = Path(name).expanduser()
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"base model {name!r} is neither one of {list(BUILT_IN)} nor a Hugging Face model folder "
            "(no config.json); pass the base explicitly: --model hf:BASE?adapter=PATH"
        )
    return path


def base_name(path: str | Path) -> str:
    """How an adapter records ``path`` as its base: a built-in name when it is one, else the path as given."""
    p = Path(path).expanduser().resolve()
    for name in BUILT_IN:
        if resolve_base(name).resolve() == p:
            return name
    return str(path)


def adapter_base(adapter: str | Path) -> Path:
    """The base model folder ``adapter``'s ``adapter_config.json`` names (``base_model_name_or_path``)."""
    cfg_file = Path(adapter).expanduser() / ADAPTER_CONFIG
    try:
        name = json.loads(cfg_file.read_text()).get("base_model_name_or_path")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{cfg_file}: cannot read the adapter config ({exc}); pass a folder saved by peft") from exc
    if not name:
        raise ConfigError(f"{cfg_file}: no base_model_name_or_path; name the base: --model hf:BASE?adapter={adapter}")
    return resolve_base(str(name))


def load_merged(base: str | Path, adapter: str | Path | None = None, **load: Any) -> Any:
    """``AutoModelForCausalLM`` of ``base`` (``from_pretrained(**load)``) with ``adapter`` merged into its weights."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, **load)
    if adapter is None:
        return model
    from peft import PeftModel

    folder = Path(adapter).expanduser()
    if not (folder / ADAPTER_CONFIG).is_file():
        raise ConfigError(f"adapter {folder}: no {ADAPTER_CONFIG}; pass a LoRA adapter folder (peft save_pretrained)")
    try:
        return PeftModel.from_pretrained(model, folder).merge_and_unload()
    except (RuntimeError, ValueError, KeyError) as exc:
        first = " ".join(line.strip() for line in str(exc).splitlines()[:2])
        raise ConfigError(
            f"adapter {folder} does not fit the base model {base} ({first[:300]}); pass the base it was "
            "trained on (--model hf:BASE?adapter=PATH)"
        ) from exc
