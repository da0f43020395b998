"""Show it learns: held-out Pass@1 before SFT, after tree SFT, after tree GRPO, through real harnesses.

    python trainers/scripts/experiment_pass1.py --out experiments/pass1-claude-code-bash   # full size
    python trainers/scripts/experiment_pass1.py --quick --out /tmp/pass1-quick
    python trainers/scripts/experiment_pass1.py --seed 1 --out DIR --reuse-before EARLIER   # same seed: skip before-SFT runs
    clawgym bench compare experiments/pass1/before experiments/pass1/after-rl

The stages and what each does: ``trainers.pass1``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trainers.pass1 import Size, run

__all__ = ["main", "parse_args"]


def parse_args(argv: list[str] | None = None) -> tuple[Path, Path, Size, Path | None]:
    """``(out, work, size, reuse_before)`` from the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="CI size: custom harness, 4 train variants per template, 13 held-out, 10 SFT steps, 1 RL step"
    )
    parser.add_argument("--seed", type=int, default=None, help="Seed of packing, sampling and evaluation (default 0)")
    parser.add_argument("--out", type=Path, default=Path("experiments/pass1-claude-code-bash"), help="Results folders land here")
    parser.add_argument("--work", type=Path, default=None, help="Models, captures, checkpoints (default OUT/work, not committed)")
    parser.add_argument("--harness", default=None, help="Comma-separated harnesses (default claude-code-bash; --quick: custom)")
    parser.add_argument("--no-select", action="store_true", help="After-RL model = RL's last step (no per-step validation runs)")
    parser.add_argument("--eval-samples", type=int, default=None, help="Sampled attempts per held-out variant (default 2; 0: none)")
    parser.add_argument(
        "--reuse-before",
        type=Path,
        default=None,
        metavar="DIR",
        help="Copy the before-SFT evaluations from DIR (an earlier run's --out with the same seed and size) "
        "instead of rerunning them; refused unless their manifests match this run",
    )
    a = parser.parse_args(argv)
    size = Size.quick() if a.quick else Size()
    if a.harness:
        size.harnesses = a.harness
    if a.seed is not None:
        size.seed = a.seed
    if a.no_select:
        size.rl_select = False
    if a.eval_samples is not None:
        size.eval_samples = a.eval_samples
    return a.out, a.work or a.out / "work", size, a.reuse_before


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return run(*parse_args(argv))


if __name__ == "__main__":
    main()
