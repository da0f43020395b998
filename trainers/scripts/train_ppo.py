"""Tree PPO through real harnesses, in TRL's script shape (value warm-up, then PPO steps).

    python trainers/scripts/train_ppo.py --config trainers/recipes/toy_ppo.yaml
    python trainers/scripts/train_ppo.py --model_name_or_path tiny --suite trainers/suites/toy-rl \\
        --harness custom --value_warmup_steps 2 --max_steps 20
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def main(script_args: Any, training_args: Any) -> Any:
    from trainers.scripts._common import resolve_model
    from trainers.tree_ppo.trainer import TreePPOTrainer

    trainer = TreePPOTrainer(training_args, resolve_model(script_args.model_name_or_path),
                             resume_from_checkpoint=training_args.resume_from_checkpoint)
    try:
        trainer.train()
        final = trainer.save_checkpoint(Path(training_args.output_dir) / "final")
    finally:
        trainer.close()
    print(f"saved {final}")
    return trainer


def make_parser(subparsers: argparse._SubParsersAction | None = None, prog: str | None = None) -> Any:
    from trl import TrlParser

    from trainers.scripts._common import ScriptArguments
    from trainers.tree_ppo.config import TreePPOConfig

    types = (ScriptArguments, TreePPOConfig)
    if subparsers is not None:
        return subparsers.add_parser("tree-ppo", help="Tree PPO through harnesses", dataclass_types=types)
    return TrlParser(types, prog=prog)


if __name__ == "__main__":
    script_args, training_args = make_parser().parse_args_and_config()
    main(script_args, training_args)
