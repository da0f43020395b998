"""How big a Pass@1 run is (``Size``), and the evaluations it makes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RL_SUITE", "STAGES", "TEST_SUITE", "TRAIN_SUITE", "Evaluation", "Size", "evaluations", "harness_list", "select_tasks"]

TRAIN_SUITE = "procgen-train"
RL_SUITE = "procgen-train-rl"
TEST_SUITE = "procgen-test"
STAGES = ("before", "after-sft", "after-rl")


@dataclass
class Size:
    """How big a run is; ``Size.quick()`` fits CI's slow tier.

    ``train_tasks`` (of ``procgen-train``) are the SFT data. ``rl_suite``/``rl_tasks``: RL's variants
    (default ``procgen-train-rl``: train pools, never in the SFT data). ``probe_tasks`` (of ``rl_suite``):
    variants the SFT policy is sampled on (``probe_attempts`` each, at ``rl_temperature``) before RL; RL
    then trains only on the templates it solved sometimes but not always, the only groups whose rewards
    vary ("" = no probe: every template). ``val_tasks`` (of ``rl_suite``): kept out of RL and evaluated
    greedily after SFT and after RL, the split on which RL's settings are chosen (never the held-out
    test variants). ``eval_samples``: attempts per
    held-out variant at ``rl_temperature`` after each stage, beside the greedy ones (0 = none).
    ``rl_pairs``: groups per RL step (0 = one per template of the RL mix). ``rl_task_sampling``:
    TreeGRPOConfig.task_sampling ("stratified": every step covers each template). ``rl_select``: keep
    every RL step's checkpoint and take the one best on ``val_tasks`` (greedy) as the after-RL model. ``rl_concurrency``:
    RL episodes in flight at most (each is a harness process).
    """

    harnesses: str = "claude-code-bash"
    train_tasks: str = "*"
    test_tasks: str = "*-0[12]"
    sft_steps: int = 32
    sft_lr: float = 5e-4
    sft_branch_tokens: int = 1024
    sft_packs_per_step: int = 4
    sft_frozen_layers: int = 20
    rl_frozen_layers: int = 20
    rl_steps: int = 3
    rl_lr: float = 1e-4
    rl_generations: int = 8
    rl_pairs: int = 0
    rl_task_sampling: str = "stratified"
    rl_select: bool = True
    rl_temperature: float = 1.0
    rl_beta: float = 0.2
    rl_concurrency: int = 28
    rl_suite: str = RL_SUITE
    rl_tasks: str = "*"
    probe_tasks: str = "*-1[34]"
    probe_attempts: int = 2
    val_tasks: str = "*-20"
    mix_weights: str | None = None
    max_tokens: int = 64
    eval_temperature: float = 0.0
    eval_samples: int = 2
    eval_concurrency: int = 4
    seed: int = 0

    @classmethod
    def quick(cls) -> Size:
        return cls(
            harnesses="custom",
            train_tasks="*-0[1-4]",
            test_tasks="*-01",
            sft_steps=10,
            sft_packs_per_step=1,
            rl_steps=1,
            rl_lr=5e-5,
            rl_generations=4,
            rl_pairs=1,
            rl_task_sampling="uniform",
            rl_select=False,
            rl_beta=0.0,
            rl_suite=TRAIN_SUITE,
            rl_tasks="*-0[1-4]",
            probe_tasks="",
            val_tasks="",
            eval_samples=0,
            eval_concurrency=13,
        )


@dataclass(frozen=True)
class Evaluation:
    """One ``clawgym bench run`` of a stage's model: its results folder name and how it samples."""

    name: str
    stage: str
    suite: str
    tasks: str
    attempts: int
    temperature: float


def evaluations(size: Size) -> list[Evaluation]:
    """Every evaluation the pipeline runs, in order: greedy held-out, sampled held-out, greedy validation."""
    plan = [Evaluation(stage, stage, TEST_SUITE, size.test_tasks, 1, size.eval_temperature) for stage in STAGES]
    if size.eval_samples:
        plan += [
            Evaluation(f"{stage}-sampled", stage, TEST_SUITE, size.test_tasks, size.eval_samples, size.rl_temperature) for stage in STAGES
        ]
    if size.val_tasks:  # train variants RL did not see: where RL's settings are judged
        plan += [Evaluation(f"val-{stage}", stage, size.rl_suite, size.val_tasks, 1, size.eval_temperature) for stage in STAGES[1:]]
    return plan


def select_tasks(suite: str, pattern: str) -> list[Any]:
    """The tasks of ``suite`` matching ``pattern``."""
    from clawgym_env.task import load_suite

    return load_suite(suite).select(pattern)


def harness_list(size: Size) -> list[str]:
    """The run's harness names."""
    return [h.strip() for h in size.harnesses.split(",") if h.strip()]
