"""RL's sampled held-out Pass@1 change over SFT, pooled over a run's sampled evaluations, with a bootstrap interval.

    python experiments/pass1-claude-code-bash/pack-nll/sampled_delta.py experiments/pass1-claude-code-bash/pack-nll/run1 \
        experiments/pass1-claude-code-bash/pack-nll/run2

Per run: the after-SFT and after-RL attempts of ``after-*-sampled`` and ``after-*-sampled6`` (k = 2 + 6 = 8 a variant).
The interval resamples (run, variant) units, the paired unit here: one variant's 8 samples are not independent draws
of the suite, so resampling attempts would understate the spread.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

from clawgym_env.runner import load_attempts

FOLDERS = {"after-sft": ("after-sft-sampled", "after-sft-sampled6"), "after-rl": ("after-rl-sampled", "after-rl-sampled6")}


def solved(run: Path, stage: str) -> tuple[Counter[str], int]:
    """Passes per held-out variant over the stage's sampled folders, and the attempt count."""
    per, n = Counter(), 0
    for name in FOLDERS[stage]:
        for a in load_attempts(run / name):
            per[a.task_id] += a.score
            n += 1
    return per, n


def main(runs: list[str], draws: int = 10_000) -> None:
    units: list[float] = []
    for run in map(Path, runs):
        (sft, n_sft), (rl, n_rl) = solved(run, "after-sft"), solved(run, "after-rl")
        variants = sorted(set(sft) | set(rl))
        per_variant = n_sft // len(variants)
        diffs = [rl[v] - sft[v] for v in variants]
        print(
            f"{run}: after SFT {sum(sft.values()):g} / {n_sft} ({100 * sum(sft.values()) / n_sft:.1f} %), after RL "
            f"{sum(rl.values()):g} / {n_rl} ({100 * sum(rl.values()) / n_rl:.1f} %); variants up {sum(d > 0 for d in diffs)}, "
            f"down {sum(d < 0 for d in diffs)}, same {sum(d == 0 for d in diffs)}"
        )
        units += [d / per_variant for d in diffs]
    rng = random.Random(0)
    means = sorted(sum(rng.choice(units) for _ in units) / len(units) for _ in range(draws))
    print(
        f"pooled RL - SFT: {100 * sum(units) / len(units):+.1f} points over {len(units)} (run, variant) units; 95 % bootstrap "
        f"[{100 * means[int(0.025 * draws)]:+.1f}, {100 * means[int(0.975 * draws)]:+.1f}]"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
