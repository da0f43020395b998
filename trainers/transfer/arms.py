"""Training the arms from the SFT adapter: tree GRPO (one harness or two), the same with shuffled rewards, more SFT.

Each run writes its candidates (the adapter at every ``RLPlan.checkpoints`` step) into its own folder; which
candidate becomes the arm's model is decided on the validation split (``trainers.transfer.stages``). An RL
run interrupted mid-way resumes from its latest checkpoint (accelerate state, sampler RNG, step); older
checkpoints keep their adapter only.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainers.core.engine import PackSlot
from trainers.rollout import RolloutBatch
from trainers.transfer.design import Arm, Design
from trainers.transfer.forward import SharedBottomForward
from trainers.tree_grpo.trainer import TreeGRPOTrainer

if TYPE_CHECKING:
    from trainers.tree_grpo.config import TreeGRPOConfig

__all__ = ["RLTrainer", "ShuffledRewardTrainer", "rl_config", "train_rl", "train_sft_more"]


class RLTrainer(SharedBottomForward, TreeGRPOTrainer):
    """Tree GRPO whose packs run the frozen bottom once for policy and reference, and the harness's shared system
    prompt through the bottom once a run and through each model's top once per weight version (``forward``)."""


class ShuffledRewardTrainer(RLTrainer):
    """The control: each group's rewards are permuted among its rollouts before the advantages (seeded by step).

    The groups, their trees, the number of updates and their sizes are those of RL; only which rollout gets
    which reward is noise, so what it learns is what training on these episodes teaches without the credit.
    The logged reward is the true one (taken before the shuffle).
    """

    def pair_advantages(self, slots: list[PackSlot], batch: RolloutBatch, rollouts: list[tuple[int, str]]) -> dict[str, float]:
        rng = random.Random(f"{self.config.seed}:{self.step}")
        for g in batch.groups:
            ids = list(g.rewards)
            values = [g.rewards[i] for i in ids]
            rng.shuffle(values)
            g.rewards = dict(zip(ids, values, strict=True))
        return super().pair_advantages(slots, batch, rollouts)


def _latest(run: Path) -> Path | None:
    ckpts = sorted(
        (p for p in run.glob("checkpoint-*") if p.name.split("-")[1].isdigit() and (p / "accelerate").is_dir()),
        key=lambda p: int(p.name.split("-")[1]),
    )
    return ckpts[-1] if ckpts else None


def rl_config(run: Path, design: Design, arm: Arm, seed: int, **overrides: Any) -> TreeGRPOConfig:
    """The tree-GRPO settings of an RL arm (``design.rl``): what the train stage runs and ``bench/grpo_step.py`` times."""
    from trainers.tree_grpo.config import TreeGRPOConfig

    plan = design.rl
    harnesses = arm.harnesses.split(",")
    settings: dict[str, Any] = {
        "output_dir": str(run),
        "suite": design.train_suite,
        "harness": arm.harnesses,
        "mix_weights": ",".join("1" for _ in harnesses) if len(harnesses) > 1 else None,
        "num_generations": plan.generations,
        "pairs_per_step": plan.groups,
        "task_sampling": "stratified",
        "max_steps": plan.steps,
        "learning_rate": plan.learning_rate,
        "lr_scheduler_type": "constant",
        "max_completion_length": plan.max_tokens,
        "temperature": plan.temperature,
        "beta": plan.beta,
        "drop_zero_variance_from_loss": plan.drop_zero_variance,
        "max_concurrent_episodes": plan.concurrency,
        "seed": seed,
        "use_cpu": True,
        "save_steps": _save_every(plan.checkpoints),
        "use_peft": True,
    }
    return TreeGRPOConfig(**{**settings, **overrides})


def train_rl(run: Path, sft_adapter: Path, design: Design, arm: Arm, seed: int) -> dict[int, Path]:
    """Tree GRPO of ``arm`` from ``sft_adapter`` into ``run``; the candidate adapters by step."""
    from clawgym_env.task import load_suite

    plan = design.rl
    done = run / "history.json"
    if not done.is_file():
        cfg = rl_config(run, design, arm, seed)
        tasks = load_suite(design.train_suite).select(design.rl_task_patterns().split(","))
        cls = ShuffledRewardTrainer if arm.kind == "rl-shuffled" else RLTrainer
        trainer = cls(cfg, sft_adapter, tasks=tasks, resume_from_checkpoint=_latest(run))

        def report(m: dict[str, float]) -> None:
            print(
                f"[{arm.name} seed {seed}] step {int(m['step'])}: reward {m.get('reward', 0.0):.3f} kl {m.get('kl', 0.0):.4f} "
                f"groups trained {int(m.get('groups_trained', 0))} rollout {m.get('rollout_s', 0.0):.0f}s "
                f"train {m.get('train_s', 0.0):.0f}s",
                flush=True,
            )

        try:
            if trainer.step < plan.steps:
                trainer.train(on_step=report)
            done.write_text(json.dumps(trainer.history, indent=1))
        finally:
            trainer.close()
    for ckpt in run.glob("checkpoint-*"):  # candidates keep their adapter; only the last keeps optimizer state
        if ckpt != _latest(run) and (ckpt / "accelerate").is_dir():
            shutil.rmtree(ckpt / "accelerate")
    return {s: run / f"checkpoint-{s}" / "model" for s in plan.checkpoints}


def _save_every(checkpoints: list[int]) -> int:
    gaps = {b - a for a, b in zip([0, *checkpoints], checkpoints, strict=False)}
    if len(gaps) != 1:
        raise ValueError(f"RLPlan.checkpoints {checkpoints}: use evenly spaced steps (a checkpoint every k steps)")
    return gaps.pop()


def train_sft_more(run: Path, sft_adapter: Path, dataset: Path, design: Design, seed: int) -> dict[int, Path]:
    """``design.rl.steps`` more tree-SFT steps of the SFT adapter on its own expert data (the compute-matched control),
    at the SFT's final learning rate scale (constant, a quarter of its peak); candidates at RL's checkpoint steps."""
    from trainers.tree_sft.config import TreeSFTConfig
    from trainers.tree_sft.trainer import TreeSFTTrainer

    plan, sft = design.rl, design.sft
    out = {s: run / f"checkpoint-{s}" for s in plan.checkpoints}
    if all((p / "adapter_config.json").is_file() for p in out.values()):
        return out
    cfg = TreeSFTConfig(
        output_dir=str(run),
        dataset_path=str(dataset),
        max_steps=plan.steps,
        learning_rate=sft.learning_rate / 4,
        lr_scheduler_type="constant",
        branch_tokens=sft.branch_tokens,
        packs_per_step=sft.packs_per_step,
        seed=seed,
        logging_steps=1,
        use_cpu=True,
        harness=sft.harnesses,
        frozen_layers=sft.frozen_layers,
        use_peft=True,
    )
    trainer = TreeSFTTrainer(cfg, sft_adapter)

    def save(m: dict[str, Any]) -> None:
        step = int(m["step"])
        if step in out:
            trainer.save(out[step])

    trainer.train(on_step=save)
    (run / "history.json").write_text(json.dumps(trainer.history, indent=1))
    return out
