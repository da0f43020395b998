"""What the training scripts share: the script arguments, model resolution, the parser and the train-and-save run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym_env.errors import ClawGymError, ConfigError
from trainers.tree_grpo.fields import explain_unknown

__all__ = ["ScriptArguments", "make_tree_parser", "resolve_model", "run_script", "train_and_save"]


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


def train_and_save(trainer_cls: Any, script_args: ScriptArguments, training_args: Any) -> Any:
    """Build ``trainer_cls``, train, save ``<output_dir>/final`` and close the trainer even on failure."""
    trainer = trainer_cls(
        training_args, resolve_model(script_args.model_name_or_path), resume_from_checkpoint=training_args.resume_from_checkpoint
    )
    try:
        trainer.train()
        final = trainer.save_checkpoint(Path(training_args.output_dir) / "final")
    finally:
        trainer.close()
    print(f"saved {final}")
    return trainer


def make_tree_parser(
    config_cls: type, command: str, help_text: str, subparsers: argparse._SubParsersAction | None = None, prog: str | None = None
) -> Any:
    """A ``TrlParser`` for ``(ScriptArguments, config_cls)``, or the ``command`` sub-parser when ``subparsers`` is given."""
    from trl import TrlParser

    types = (ScriptArguments, config_cls)
    if subparsers is not None:
        return subparsers.add_parser(command, help=help_text, dataclass_types=types)
    return TrlParser(types, prog=prog)  # type: ignore[arg-type]  # TRL's alias misses dataclass types


def run_script(make_parser: Callable[[], Any], main: Callable[[Any, Any], Any], argv: Sequence[str] | None = None) -> None:
    """Parse flags (and ``--config``) and run ``main``; a configuration mistake is one ``error:`` line, exit 2."""
    try:
        try:
            script_args, training_args = make_parser().parse_args_and_config(argv)
        except OSError as exc:  # --config names a missing or unreadable file
            raise ConfigError(f"--config: cannot read {exc.filename or ''} ({exc.strerror or exc})") from None
        except ValueError as exc:  # an unknown flag or config key (a removed field says what replaces it)
            raise ConfigError(explain_unknown(str(exc))) from None
        main(script_args, training_args)
    except ClawGymError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
