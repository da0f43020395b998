"""Tree PPO through real harnesses, in TRL's script shape (value warm-up, then PPO steps).

    python trainers/scripts/train_ppo.py --config trainers/recipes/toy_ppo.yaml
    python trainers/scripts/train_ppo.py --model_name_or_path tiny --suite trainers/suites/toy-rl \\
        --harness custom --value_warmup_steps 2 --max_steps 20
"""

from __future__ import annotations

import argparse
from typing import Any


def main(script_args: Any, training_args: Any) -> Any:
    from trainers.scripts._common import train_and_save
    from trainers.tree_ppo.trainer import TreePPOTrainer

    return train_and_save(TreePPOTrainer, script_args, training_args)


def make_parser(subparsers: argparse._SubParsersAction | None = None, prog: str | None = None) -> Any:
    from trainers.scripts._common import make_tree_parser
    from trainers.tree_ppo.config import TreePPOConfig

    return make_tree_parser(TreePPOConfig, "tree-ppo", "Tree PPO through harnesses", subparsers, prog)


if __name__ == "__main__":
    from trainers.scripts._common import run_script

    run_script(make_parser, main)
