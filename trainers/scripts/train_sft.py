"""Tree SFT on captured harness episodes, in TRL's script shape.

    python trainers/scripts/train_sft.py --model_name_or_path ./model --dataset_path ./expert-dataset \\
        --output_dir runs/sft --num_train_epochs 20 --learning_rate 3e-3

Any TreeSFTConfig / SFTConfig field is a flag; ``--config recipe.yaml`` sets defaults that flags
override (TrlParser). The dataset comes from ``trainers.tree_sft.expert`` (expert replays through
real harnesses, verifier-filtered); the model is saved to ``<output_dir>/final``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def main(script_args: Any, training_args: Any) -> Any:
    from trainers.scripts._common import resolve_model
    from trainers.tree_sft.trainer import TreeSFTTrainer

    trainer = TreeSFTTrainer(training_args, resolve_model(script_args.model_name_or_path))
    trainer.train()
    print(f"saved {trainer.save(Path(training_args.output_dir) / 'final')}")
    return trainer


def make_parser(subparsers: argparse._SubParsersAction | None = None, prog: str | None = None) -> Any:
    from trainers.scripts._common import make_tree_parser
    from trainers.tree_sft.config import TreeSFTConfig

    return make_tree_parser(TreeSFTConfig, "tree-sft", "Tree SFT on captured harness episodes", subparsers, prog)


if __name__ == "__main__":
    from trainers.scripts._common import run_script

    run_script(make_parser, main)
