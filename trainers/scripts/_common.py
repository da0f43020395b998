"""What the training scripts share: the script arguments and model resolution."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from clawgym_env.errors import ConfigError

__all__ = ["ScriptArguments", "resolve_model"]


@dataclass
class ScriptArguments:
    """Arguments that are not training hyper-parameters."""

    model_name_or_path: str = field(
        default="tiny",
        metadata={"help": "A Hugging Face model folder, 'tiny' (built locally, tests) or 'smollm2' (embedded SmolLM2-135M)."},
    )


def resolve_model(name: str) -> Path:
    """A model folder for ``name``; no model hub is contacted."""
    if name == "tiny":
        from clawgym_env.models import tiny_model_path

        return tiny_model_path()
    if name == "smollm2":
        from clawgym_env.models import default_model_path

        return default_model_path()
    path = Path(name.removeprefix("hf:"))
    if not (path / "config.json").is_file():
        raise ConfigError(f"--model_name_or_path {name!r}: not a model folder (no config.json); pass a folder, 'tiny' or 'smollm2'")
    return path
