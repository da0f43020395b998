"""Tree GRPO through real harnesses, in TRL's script shape.

    python trainers/scripts/train_grpo.py --config trainers/recipes/toy_grpo.yaml
    python trainers/scripts/train_grpo.py --model_name_or_path ./my-model --suite clawgym-original \\
        --harness custom,claude-code --mix-weights 1,1 --num_generations 4 --max_steps 200

Any TreeGRPOConfig / GRPOConfig field is a flag; ``--config recipe.yaml`` sets defaults that
flags override (TrlParser). ``--resume_from_checkpoint <output_dir>/checkpoint-N`` continues a run.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def main(script_args: Any, training_args: Any) -> Any:
    from trainers.scripts._common import resolve_model
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    trainer = TreeGRPOTrainer(training_args, resolve_model(script_args.model_name_or_path),
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
    from trainers.tree_grpo.config import TreeGRPOConfig

    types = (ScriptArguments, TreeGRPOConfig)
    if subparsers is not None:
        return subparsers.add_parser("tree-grpo", help="Tree GRPO through harnesses", dataclass_types=types)
    return TrlParser(types, prog=prog)


if __name__ == "__main__":
    script_args, training_args = make_parser().parse_args_and_config()
    main(script_args, training_args)
