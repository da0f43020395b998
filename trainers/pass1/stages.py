"""The Pass@1 experiment's training stages: the starting model, expert capture, tree SFT, the probe, tree GRPO and the
choice of its checkpoint on the validation split."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from clawgym_env._sync import run_sync
from clawgym_env.errors import ConfigError
from trainers.pass1.evaluate import evaluate
from trainers.pass1.size import TRAIN_SUITE, Size, harness_list, select_tasks

__all__ = ["best_step", "build_model", "capture", "learnable_categories", "probe", "rl", "rl_tasks", "select_rl_step", "sft"]


def build_model(work: Path, size: Size) -> Path:
    """Stage 1: the embedded pretrained SmolLM2-135M-Instruct (converted once into the models cache)."""
    from clawgym_env.models import default_model_path

    return default_model_path()


def capture(work: Path, model: Path, size: Size) -> Path:
    """Stage 2: expert episodes of every train variant through every harness, verifier-filtered."""
    from transformers import AutoTokenizer

    from trainers.tree_sft.expert import capture_experts, write_dataset

    out = work / "expert-dataset"
    if (out / "dataset_info.json").is_file():
        return out
    tok = AutoTokenizer.from_pretrained(model)
    results = run_sync(capture_experts(select_tasks(TRAIN_SUITE, size.train_tasks), harness_list(size), tok, concurrency=4))
    counts = write_dataset(results, out)
    print(f"expert capture: {counts}", flush=True)
    return out


def sft(work: Path, model: Path, dataset: Path, size: Size) -> Path:
    """Stage 3: tree SFT from the starting model; returns the saved model folder."""
    from trainers.tree_sft.config import TreeSFTConfig
    from trainers.tree_sft.trainer import TreeSFTTrainer

    out = work / "sft"
    if (out / "final" / "config.json").is_file():
        return out / "final"
    cfg = TreeSFTConfig(
        output_dir=str(out),
        dataset_path=str(dataset),
        max_steps=size.sft_steps,
        learning_rate=size.sft_lr,
        warmup_steps=0.1,
        branch_tokens=size.sft_branch_tokens,
        packs_per_step=size.sft_packs_per_step,
        lr_scheduler_type="cosine",
        seed=size.seed,
        logging_steps=1,
        use_cpu=True,
        harness=size.harnesses,
        frozen_layers=size.sft_frozen_layers,
    )
    trainer = TreeSFTTrainer(cfg, model)
    trainer.train()
    return trainer.save(out / "final")


def learnable_categories(attempts: list[Any]) -> list[str]:
    """Templates (attempt categories) whose mean score is strictly between 0 and 1: GRPO's groups there can vary."""
    scores: dict[str, list[float]] = {}
    for a in attempts:
        scores.setdefault(a.category, []).append(a.score)
    return sorted(c for c, v in scores.items() if 0.0 < sum(v) / len(v) < 1.0)


def rl_tasks(size: Size, categories: list[str] | None) -> list[Any]:
    """RL's variants: ``rl_tasks`` of ``rl_suite`` minus ``val_tasks``, only ``categories`` when a probe chose them."""
    from fnmatch import fnmatch

    tasks = [t for t in select_tasks(size.rl_suite, size.rl_tasks) if not (size.val_tasks and fnmatch(t.id, size.val_tasks))]
    if categories is not None:
        tasks = [t for t in tasks if t.category in categories]
    if not tasks:
        raise ConfigError(
            f"experiment_pass1: no train variant left for RL (rl_suite={size.rl_suite!r}, rl_tasks={size.rl_tasks!r}, "
            f"val_tasks={size.val_tasks!r}, probed categories {categories}); widen --probe-tasks or train_tasks"
        )
    return tasks


def probe(work: Path, model: Path, size: Size) -> list[str] | None:
    """Stage 3b: sample the SFT model on ``probe_tasks`` at RL's temperature; the templates RL should train on."""
    from clawgym_env.runner import load_attempts

    if not size.probe_tasks:
        return None
    chosen = work / "probe" / "categories.json"
    if not chosen.is_file():
        out = work / "probe"
        if out.exists():
            shutil.rmtree(out)
        evaluate(
            "probe",
            model,
            out,
            size,
            suite=size.rl_suite,
            tasks=size.probe_tasks,
            attempts=size.probe_attempts,
            temperature=size.rl_temperature,
        )
        attempts = load_attempts(out)
        rates = {c: [a.score for a in attempts if a.category == c] for c in sorted({a.category for a in attempts})}
        print("probe: " + ", ".join(f"{c} {sum(v):g}/{len(v)}" for c, v in rates.items()), flush=True)
        chosen.write_text(json.dumps(learnable_categories(attempts)))
    return list(json.loads(chosen.read_text()))


def rl(work: Path, model: Path, size: Size, categories: list[str] | None = None) -> Path:
    """Stage 4: tree GRPO on the train variants (the probed ``categories`` only, if given) from the SFT model."""
    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer
    from trainers.tree_sft.forward import DetachedTrunkForward
    from trainers.tree_sft.frozen import freeze_bottom

    class Trainer(DetachedTrunkForward, TreeGRPOTrainer):
        pass

    out = work / "rl"
    if (out / "final" / "model" / "config.json").is_file():
        return out / "final" / "model"
    tasks = rl_tasks(size, categories)
    pairs = size.rl_pairs or len({t.category for t in tasks})
    cfg = TreeGRPOConfig(
        output_dir=str(out),
        suite=size.rl_suite,
        harness=size.harnesses,
        mix_weights=size.mix_weights,
        num_generations=size.rl_generations,
        pairs_per_step=pairs,
        task_sampling=size.rl_task_sampling,
        max_steps=size.rl_steps,
        learning_rate=size.rl_lr,
        max_completion_length=size.max_tokens,
        temperature=size.rl_temperature,
        max_concurrent_episodes=min(size.rl_generations * pairs, size.rl_concurrency),
        seed=size.seed,
        use_cpu=True,
        save_steps=1 if _selects(size) else 0,
        lr_scheduler_type="constant",
        beta=size.rl_beta,
    )
    trainer = Trainer(cfg, model, tasks=tasks)
    freeze_bottom(trainer.policy, size.rl_frozen_layers)  # AdamW skips them: their grad stays None

    def report(m: dict[str, float]) -> None:
        groups = int(m.get("groups_trained", 0) + m.get("groups_skipped", 0))
        varied = groups - round(m.get("frac_reward_zero_std", 0.0) * groups)  # equal-reward groups train with advantage 0
        print(
            f"rl step {int(m.get('step', 0))}: mean reward {m.get('reward', 0.0):.3f}, groups with reward variance {varied} / {groups}",
            flush=True,
        )

    try:
        history = trainer.train(on_step=report)
        final = trainer.save_checkpoint(out / "final")
        (out / "history.json").write_text(json.dumps(history, indent=1))
    finally:
        trainer.close()
    return final / "model"


def _selects(size: Size) -> bool:
    return size.rl_select and bool(size.val_tasks)


def best_step(scores: dict[int, float]) -> int:
    """The step with the highest validation score; of equal scores the later (more RL, same validation)."""
    return max(scores, key=lambda k: (scores[k], k))


def select_rl_step(work: Path, final: Path, size: Size) -> Path:
    """Stage 4b: each RL step's checkpoint greedily on ``val_tasks``; the best step's model (ties: the later).

    Judged on train variants RL never saw, never on the held-out ones; written to ``rl/selection.json``.
    Without ``rl_select`` (or a validation split) the final model is the after-RL model.
    """
    from clawgym_env.runner import load_attempts

    if not _selects(size):
        return final
    chosen = work / "rl" / "selection.json"
    if not chosen.is_file():
        scores: dict[int, float] = {}
        for step in sorted(int(p.name.split("-")[1]) for p in (work / "rl").glob("checkpoint-*") if p.name.split("-")[1].isdigit()):
            out = work / "rl" / f"val-step-{step}"
            if out.exists():
                shutil.rmtree(out)
            evaluate(out.name, work / "rl" / f"checkpoint-{step}" / "model", out, size, suite=size.rl_suite, tasks=size.val_tasks)
            attempts = load_attempts(out)
            scores[step] = sum(a.score for a in attempts) / max(1, len(attempts))
        if not scores:
            raise ConfigError(f"select_rl_step: no checkpoint-<step> under {work / 'rl'}; the RL stage saves one a step with rl_select")
        best = best_step(scores)
        print(
            "rl selection on " + size.val_tasks + ": " + ", ".join(f"step {k} {v:.3f}" for k, v in scores.items()) + f" -> step {best}",
            flush=True,
        )
        chosen.write_text(json.dumps({"val_tasks": size.val_tasks, "scores": scores, "step": best}, indent=1))
    step = json.loads(chosen.read_text())["step"]
    return work / "rl" / f"checkpoint-{step}" / "model"
