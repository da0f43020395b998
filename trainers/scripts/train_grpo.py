"""Tree GRPO through real harnesses, in TRL's script shape.

    python trainers/scripts/train_grpo.py --config trainers/recipes/toy_grpo.yaml
    python trainers/scripts/train_grpo.py --model_name_or_path ./my-model --suite clawgym-original \\
        --harness custom,claude-code --mix-weights 1,1 --num_generations 4 --max_steps 200

Any TreeGRPOConfig / GRPOConfig field is a flag; ``--config recipe.yaml`` sets defaults that
flags override (TrlParser). ``--resume_from_checkpoint <output_dir>/checkpoint-N`` continues a run.
"""

from __future__ import annotations

import argparse
from typing import Any


def main(script_args: Any, training_args: Any) -> Any:
    from trainers.scripts._common import train_and_save
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    return train_and_save(TreeGRPOTrainer, script_args, training_args)


def make_parser(subparsers: argparse._SubParsersAction | None = None, prog: str | None = None) -> Any:
    from trainers.scripts._common import make_tree_parser
    from trainers.tree_grpo.config import TreeGRPOConfig

    return make_tree_parser(TreeGRPOConfig, "tree-grpo", "Tree GRPO through harnesses", subparsers, prog)


if __name__ == "__main__":
    from trainers.scripts._common import run_script

    run_script(make_parser, main)
