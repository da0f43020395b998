"""The transfer experiment stage by stage; every stage reuses what an earlier run of it left in ``work`` or ``out``.

    register   design.json and PREREGISTRATION.md (commit both before any test evaluation)
    capture    expert episodes of the one-command tasks through the SFT harnesses (verifier-filtered)
    sft        tree SFT of a LoRA adapter on them
    train      every trained arm and seed from the SFT adapter: candidates at the checkpoint steps,
               each judged on the validation split; the best is the arm's adapter (``adapters/<arm>/seed<k>``)
    test       every arm's adapter on the test split, greedy and sampled (once per adapter: a complete
               results folder is never run again); refused until the pre-registration is committed
    analyze    tables and curves (``trainers.transfer.analysis``)

``out`` (committed) holds the design, the pre-registration, adapters, validation and test results folders,
each run's per-step history, tables, curves and the README; ``work`` (not committed) holds the expert
dataset, training checkpoints and logs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from clawgym_env._sync import run_sync
from clawgym_env.errors import ConfigError
from trainers.transfer.design import REPO, Arm, Design, Evaluation
from trainers.transfer.evaluate import best_checkpoint, evaluate, mean_score, publish_adapter, record_dir

__all__ = ["STAGES", "arm_adapter", "capture", "registered", "sft", "test", "train"]

STAGES = ("register", "capture", "sft", "train", "test", "analyze")


def capture(work: Path, design: Design) -> Path:
    """Expert episodes of ``design.sft.tasks`` of the SFT suite through the SFT harnesses, kept when scored 1.0."""
    from transformers import AutoTokenizer

    from clawgym_env.models import default_model_path
    from clawgym_env.task import load_suite
    from trainers.tree_sft.expert import capture_experts, write_dataset

    out = work / ("expert-dataset-look" if design.sft.look_first else "expert-dataset")
    if (out / "dataset_info.json").is_file():
        return out
    tok = AutoTokenizer.from_pretrained(default_model_path())
    tasks = load_suite(design.sft.suite).select(design.sft.tasks.split(","))
    results = run_sync(capture_experts(tasks, design.sft.harnesses.split(","), tok, concurrency=4, look_first=design.sft.look_first))
    print(f"expert capture: {write_dataset(results, out)}", flush=True)
    return out


def sft(work: Path, out: Path, design: Design, dataset: Path | None) -> Path:
    """Tree SFT of a LoRA adapter on the expert dataset, from the embedded SmolLM2 (or from ``design.sft.start``);
    published to ``adapters/sft``."""
    from clawgym_env.models import default_model_path
    from trainers.tree_sft.config import TreeSFTConfig
    from trainers.tree_sft.trainer import TreeSFTTrainer

    final = work / "sft" / "final"
    if design.sft.adapter:  # a published one (the quick form starts from the full experiment's)
        final = (REPO / design.sft.adapter).resolve()
    elif not (final / "adapter_config.json").is_file():
        p = design.sft
        cfg = TreeSFTConfig(
            output_dir=str(work / "sft"),
            dataset_path=str(dataset),
            max_steps=p.steps,
            learning_rate=p.learning_rate,
            warmup_steps=0.1,
            branch_tokens=p.branch_tokens,
            packs_per_step=p.packs_per_step,
            lr_scheduler_type="cosine",
            seed=p.seed,
            logging_steps=1,
            use_cpu=True,
            harness=p.harnesses,
            frozen_layers=p.frozen_layers,
            use_peft=True,
            lora_r=p.lora_r,
            lora_alpha=p.lora_alpha,
        )
        start = (REPO / p.start).resolve() if p.start else default_model_path()
        trainer = TreeSFTTrainer(cfg, start)
        trainer.train()
        trainer.save(final)
    published = out / "adapters" / "sft"
    if not (published / "adapter_config.json").is_file():
        publish_adapter(final, published)
        if (final / "sft_state.json").is_file():
            state = json.loads((final / "sft_state.json").read_text())
            record_dir(out, "sft").mkdir(parents=True, exist_ok=True)
            (record_dir(out, "sft") / "history.json").write_text(json.dumps(state["log_history"], indent=1))
    return published


def arm_adapter(out: Path, arm: Arm, seed: int) -> Path:
    """Where an arm's adapter is published (the SFT adapter itself for the ``sft`` arm)."""
    return out / "adapters" / "sft" if arm.kind == "sft" else out / "adapters" / arm.name / f"seed{seed}"


def train(work: Path, out: Path, design: Design, arm: Arm, seed: int, sft_adapter: Path, dataset: Path) -> Path:
    """One trained arm and seed: candidates, each on the validation split, the best published; returns its adapter."""
    from trainers.transfer.arms import train_rl, train_sft_more

    target = arm_adapter(out, arm, seed)
    record = record_dir(out, arm.name, seed)
    if (target / "adapter_config.json").is_file() and (record / "selection.json").is_file():
        return target
    run = work / "runs" / arm.name / f"seed{seed}"
    if arm.kind == "sft-more":
        candidates = train_sft_more(run, sft_adapter, dataset, design, seed)
    else:
        candidates = train_rl(run, sft_adapter, design, arm, seed)
    record.mkdir(parents=True, exist_ok=True)
    (record / "history.json").write_text((run / "history.json").read_text())
    scores: dict[int, float] = {}
    best = next(iter(candidates))  # one candidate: nothing to choose, the validation split is not read
    if len(candidates) > 1:
        val = Evaluation("val", design.rl.temperature, design.val_attempts)
        scores = {step: mean_score(evaluate(path, record / f"val-step{step}", design, val, seed)) for step, path in candidates.items()}
        best = best_checkpoint(scores)
        print(
            f"[{arm.name} seed {seed}] validation: " + ", ".join(f"step {k} {v:.3f}" for k, v in scores.items()) + f" -> step {best}",
            flush=True,
        )
    publish_adapter(candidates[best], target)
    (record / "selection.json").write_text(json.dumps({"scores": scores, "step": best, "split": design.task_patterns("val")}, indent=1))
    return target


def registered(out: Path) -> str | None:
    """Why the test split may not be read yet (None: the pre-registration is there, and committed when ``out`` is in git)."""
    prereg = out / "PREREGISTRATION.md"
    if not prereg.is_file():
        return f"no {prereg}: run the register stage, review it and commit it"
    inside = subprocess.run(["git", "-C", str(out), "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True)
    if inside.returncode != 0:
        return None
    for name in ("PREREGISTRATION.md", "design.json"):
        status = subprocess.run(["git", "-C", str(out), "status", "--porcelain", "--", name], capture_output=True, text=True).stdout
        if status.strip():
            return f"{out / name} is not committed as it is: commit the pre-registration before the first test evaluation"
    return None


def test(out: Path, design: Design, arm: Arm, seed: int) -> list[Path]:
    """Every test evaluation of one arm's adapter (each run once: a complete folder is kept as it is)."""
    why = registered(out)
    if why is not None:
        raise ConfigError(f"test split refused: {why}")
    adapter = arm_adapter(out, arm, seed)
    if not (adapter / "adapter_config.json").is_file():
        raise ConfigError(f"{adapter}: no adapter for {arm.name} seed {seed}; run the train stage first")
    record = record_dir(out, arm.name, seed)
    return [evaluate(adapter, record / e.name, design, e, seed) for e in design.evaluations(arm, seed)]
