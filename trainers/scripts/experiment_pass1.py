"""Show it learns: held-out Pass@1 before SFT, after tree SFT, after tree GRPO, through real harnesses.

    python trainers/scripts/experiment_pass1.py --out experiments/pass1-claude-code-bash   # full size
    python trainers/scripts/experiment_pass1.py --quick --out /tmp/pass1-quick
    python trainers/scripts/experiment_pass1.py --seed 1 --out DIR --reuse-before EARLIER   # same seed: skip before-SFT runs
    clawgym bench compare experiments/pass1/before experiments/pass1/after-rl

Stages (each a function, so other experiments can reuse or swap one):
1. ``build_model``: the embedded pretrained SmolLM2-135M-Instruct (``clawgym_env.models``), which
   can already copy text and knows shell commands but not our tool-call format. Its context is
   8,192 tokens, so the harnesses are Claude Code with ``--tools Bash`` (``claude-code-bash``, the
   default: a 3,150-token first prompt whose first 2,902 tokens every task shares) and the custom loop
   (``--harness custom``, ~470 tokens, the ``--quick`` size); the full Claude Code tool set (~12.4k
   tokens) does not fit and is not used (a call that would not fit fails loudly in the backend, it is
   never truncated).
2. ``capture``: expert episodes of every train variant through every harness
   (``trainers.tree_sft.expert``), kept only when the verifier scores 1.0, saved with ``datasets``.
3. ``sft``: ``TreeSFTTrainer`` on those captures: ``sft_packs_per_step`` packs a step share one trunk
   forward, and the frozen bottom layers run once per pack (``trainers.tree_sft.frozen``).
4. ``probe``: the SFT model sampled ``probe_attempts`` times on ``probe_tasks`` of ``rl_suite`` at RL's
   temperature; RL keeps the templates it solved sometimes but not always (``learnable_categories``).
   ``rl_suite`` (``procgen-train-rl``) holds train-split variants the SFT data never had: on the SFT
   variants themselves a memorised policy is right every time or wrong every time, and no group varies.
5. ``rl``: tree GRPO (``TreeGRPOTrainer`` with the detached-trunk forward, a KL term ``rl_beta`` to the
   SFT model, the same bottom layers frozen) on those templates' ``rl_suite`` variants minus ``val_tasks``,
   from the SFT model, sampled at ``rl_temperature``; with ``rl_task_sampling="stratified"`` every step
   has one group per template. ``select_rl_step``: every step's checkpoint greedily on ``val_tasks``;
   the best (ties: the later) is the after-RL model.
6. ``evaluate``: ``clawgym bench run`` on ``procgen-test`` (held-out variants) for the model before
   SFT, after SFT and after RL, at ``eval_temperature`` (0: greedy); again with ``eval_samples``
   attempts at ``rl_temperature`` (``<stage>-sampled``: the sampled Pass@1 that GRPO's objective, the
   expected reward at that temperature, is about); and on ``val_tasks`` after SFT and after RL (train-split
   variants neither SFT nor RL saw: where RL's settings are judged); then ``clawgym bench compare``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from clawgym_env._sync import run_sync
from clawgym_env.errors import ConfigError

__all__ = [
    "Evaluation",
    "Size",
    "build_model",
    "capture",
    "evaluate",
    "evaluations",
    "learnable_categories",
    "main",
    "parse_args",
    "probe",
    "reusable",
    "rl",
    "rl_tasks",
    "run",
    "best_step",
    "select_rl_step",
    "sft",
]

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


def _select(suite: str, pattern: str) -> list[Any]:
    from clawgym_env.task import load_suite

    return load_suite(suite).select(pattern)


def _harnesses(size: Size) -> list[str]:
    return [h.strip() for h in size.harnesses.split(",") if h.strip()]


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
    results = run_sync(capture_experts(_select(TRAIN_SUITE, size.train_tasks), _harnesses(size), tok, concurrency=4))
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

    tasks = [t for t in _select(size.rl_suite, size.rl_tasks) if not (size.val_tasks and fnmatch(t.id, size.val_tasks))]
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


def _model_spec(model: Path, size: Size) -> str:
    # episodes in flight are decoded as one batch; the custom agent gives up on a call after 600 s. The backend's
    # seed derives one per (session, call): `bench run --seed` would give every attempt the same samples
    return f"hf:{model}?max_batch={size.eval_concurrency}&seed={size.seed}"


def reusable(folder: Path, e: Evaluation, model: Path, size: Size) -> str | None:
    """Why ``folder`` is not the bench run that ``e`` of ``model`` would make (None: it is, and is complete).

    The runner's own test of "same run" (``run_differences``, what guards ``bench run`` into a used folder), plus the
    harness versions, which a manifest records and that test does not compare.
    """
    from clawgym_env.harness_registry import load_harness_class
    from clawgym_env.runner import RunConfig, import_object, load_attempts, load_manifest, run_differences

    if not (folder / "manifest.json").is_file():
        return f"no {folder / 'manifest.json'}"
    config = RunConfig(
        model=_model_spec(model, size),
        harnesses=_harnesses(size),
        suite=e.suite,
        tasks=e.tasks,
        attempts=e.attempts,
        max_tokens=size.max_tokens,
        temperature=e.temperature,
    )  # as `evaluate` runs it
    suite = import_object(config.worker).describe_suite(config)
    m = load_manifest(folder)
    wrong = []
    for field, (have, want) in run_differences(config, suite, m).items():
        if field == "task_ids":
            extra, missing = sorted(set(have) - set(want)), sorted(set(want) - set(have))
            wrong.append(f"task_ids differ (not in this run: {extra[:3]}, missing: {missing[:3]})")
        elif field == "sampling":
            wrong += [f"{k} {have.get(k)!r} (this run: {want.get(k)!r})" for k in sorted({*have, *want}) if have.get(k) != want.get(k)]
        else:
            wrong.append(f"{field} {have!r} (this run: {want!r})")
    versions = {h: load_harness_class(h).version for h in config.harnesses}
    if m.harnesses != versions:
        wrong.append(f"harness versions {m.harnesses!r} (this run: {versions!r})")
    if wrong:
        return "; ".join(wrong)
    done, expected = len(load_attempts(folder)), len(suite.tasks) * len(config.harnesses) * e.attempts
    return None if done == expected else f"{done} of {expected} attempts recorded"


def evaluate(
    stage: str,
    model: Path,
    out: Path,
    size: Size,
    *,
    suite: str = TEST_SUITE,
    tasks: str | None = None,
    attempts: int = 1,
    temperature: float | None = None,
) -> Path:
    """Stage 5: ``clawgym bench run`` of ``model`` on the held-out variants (or ``suite``/``tasks``) into ``out``."""
    temperature = size.eval_temperature if temperature is None else temperature
    cmd = [
        "clawgym",
        "bench",
        "run",
        "--model",
        _model_spec(model, size),
        "--harness",
        size.harnesses,
        "--suite",
        suite,
        "--tasks",
        tasks or size.test_tasks,
        "-k",
        str(attempts),
        "--concurrency",
        str(size.eval_concurrency),
        "--max-tokens",
        str(size.max_tokens),
        "--temperature",
        str(temperature),
        "--out",
        str(out),
        "--no-progress",
    ]
    print(f"[{stage}] $ {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True)
    return out


def _check_reuse(reuse_before: Path | None, model: Path, size: Size) -> dict[str, Path]:
    """The before-SFT evaluations to copy (name -> folder of ``reuse_before``); a ConfigError if any is not this run's."""
    if reuse_before is None:
        return {}
    names = {}
    for e in evaluations(size):
        if e.stage == "before":
            why = reusable(reuse_before / e.name, e, model, size)
            if why is not None:
                raise ConfigError(
                    f"--reuse-before {reuse_before}: {e.name} is not this run's evaluation: {why}; drop --reuse-before to run it"
                )
            names[e.name] = reuse_before / e.name
    return names


def run(out: Path, work: Path, size: Size, reuse_before: Path | None = None) -> dict[str, Any]:
    """The whole pipeline; returns the per-stage timings. Stages already done in ``work`` are reused.

    ``reuse_before``: an earlier run's results folder whose before-SFT evaluations (the starting model, so the
    same for every run of one seed) are copied instead of rerun (about 25 min of the full size), each only if its
    manifest is exactly the bench run this one would make; otherwise a ConfigError says which field differs.
    """
    times: dict[str, float] = {}

    def timed(name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        value = fn(*args, **kwargs)
        times[name] = round(time.perf_counter() - t0, 1)
        print(f"== {name}: {times[name]:.0f}s", flush=True)
        return value

    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    model = timed("build_model", build_model, work, size)
    reused = _check_reuse(reuse_before, model, size)  # before an hour of training, not after
    dataset = timed("capture", capture, work, model, size)
    models = {"before": model}
    models["after-sft"] = timed("sft", sft, work, model, dataset, size)
    categories = timed("probe", probe, work, models["after-sft"], size)
    final = timed("rl", rl, work, models["after-sft"], size, categories)
    models["after-rl"] = timed("select_rl_step", select_rl_step, work, final, size)
    selection = work / "rl" / "selection.json"
    chosen = work / "rl" / f"val-step-{json.loads(selection.read_text())['step']}" if selection.is_file() else None
    for e in evaluations(size):
        target = out / e.name
        if target.exists():
            shutil.rmtree(target)
        if e.name in reused:
            shutil.copytree(reused[e.name], target)
            continue
        if e.name == "val-after-rl" and chosen is not None:  # select_rl_step ran this same bench run of this model
            shutil.copytree(chosen, target)
            continue
        timed(
            e.name if e.name.startswith("val-") else f"eval-{e.name}",
            evaluate,
            e.name,
            models[e.stage],
            target,
            size,
            suite=e.suite,
            tasks=e.tasks,
            attempts=e.attempts,
            temperature=e.temperature,
        )
    meta = {
        "size": asdict(size),
        "seconds": times,
        "rl_categories": categories,
        "total_s": round(sum(times.values()), 1),
        "reused": {name: str(folder) for name, folder in reused.items()},
        "rl_selection": json.loads(selection.read_text()) if selection.is_file() else None,
        "command": " ".join(["python", "trainers/scripts/experiment_pass1.py", *sys.argv[1:]]),
    }
    (out / "experiment.json").write_text(json.dumps(meta, indent=1))
    subprocess.run(["clawgym", "bench", "compare", str(out / "before"), str(out / "after-sft")], check=False)
    subprocess.run(["clawgym", "bench", "compare", str(out / "after-sft"), str(out / "after-rl")], check=False)
    if size.eval_samples:
        subprocess.run(["clawgym", "bench", "compare", str(out / "after-sft-sampled"), str(out / "after-rl-sampled")], check=False)
    return meta


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
