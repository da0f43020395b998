"""Tree GRPO with branching vs without, at the same generated-token budget, on multi-step procgen tasks.

    OMP_NUM_THREADS=1 nice -n 15 python experiments/branching/compare.py --seeds 0,1   # -> experiments/branching/multistep/

Tasks: ``procgen-multistep-train`` (``clawgym_env.task.procgen_multistep``): each solution is 2-3
shell commands where a later one uses what an earlier one printed, so an episode is 3-4 calls and
a branch at call k >= 1 resamples a decision that changes the reward. (The Pass@1 experiment's
one-command ``procgen-train`` tasks are 2-call episodes: every branch point is the closing "Done.",
which is why the runs ``sft80`` / ``sft120`` on them could not show anything;
``--suite procgen-train --tasks '[wad]*-0[1-4]' --sft_tasks '[wad]*-0[1-4]' --rl_lr 1e-3 --max_tokens 48``
reruns them.)

Policy: the tiny Qwen3-architecture model (``clawgym_env.models.tiny``, random weights) taught the
tool-call format by a short tree SFT on verified expert episodes of the ``--sft_tasks`` variants
through the custom harness (``trainers.tree_sft.expert``, then the Pass@1 experiment's ``sft``
stage), then trained by RL on the ``--tasks`` variants. Not the
Pass@1 experiment's SmolLM2-135M: it costs ~40 s per 600-token forward+backward and ~20 s per
32-token call on 2 CPU cores, so four RL runs of it take many hours.

Arms, same tasks, learning rate, sampling and leaves per step (``pairs_per_step`` x 4):
- ``chain``: ``num_generations=4`` independent episodes per group, GRPO's group baseline;
- ``branching``: 2 roots + 2 branches replayed from them (``--branching``, uniform points), TreeRL
  step advantages.
Each arm trains until it has generated ``budget`` completion tokens (``generated_tokens``:
sampled by the policy; replayed calls are free), and every ``budget / checkpoints`` tokens the
policy is evaluated on fresh independent episodes of the training tasks (not counted in the
budget). Both curves are printed side by side and written to ``<out>/seed-<s>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ARMS = ("chain", "branching")


@dataclass
class Setup:
    """What one comparison runs; every arm of every seed shares it."""

    suite: str = "procgen-multistep-train"
    tasks: str = "*-0[1-4]"
    """RL and evaluation: variants 01-04 of every template (24 tasks)."""
    sft_tasks: str = "*-0[1-4]"
    """The expert episodes the starting policy is taught on. The same variants: the 2-layer tiny model learns each
    episode's commands by heart but does not copy a number it never saw from a tool output, so on unseen variants
    it scores 0 (measured: 0/24 on 05-08 after 300 steps) and RL there would have no reward to learn from."""
    sft_steps: int = 250
    """Pilot, eval at T=1 on the 24 tasks: 150 steps 0.08, 300 steps 0.75; in between leaves room both ways."""
    sft_lr: float = 1e-2
    rl_lr: float = 3e-4
    """1e-3 unlearned the SFT policy in both arms (``sft120``)."""
    pairs_per_step: int = 2
    max_tokens: int = 64
    temperature: float = 1.0
    budget: int = 8000
    checkpoints: int = 4
    eval_episodes: int = 2
    max_steps: int = 40


def select(suite: str, pattern: str) -> list[Any]:
    from clawgym_env.task import load_suite

    return load_suite(suite).select(pattern)


def policy(work: Path, setup: Setup) -> Path:
    """The SFT'd tiny model (expert dataset and model cached in ``work``)."""
    from transformers import AutoTokenizer

    from clawgym_env._sync import run_sync
    from clawgym_env.models import tiny_model_path
    from trainers.pass1 import Size, sft
    from trainers.tree_sft.expert import capture_experts, write_dataset

    dataset = work / "expert-dataset"
    if not (dataset / "dataset_info.json").is_file():
        tok = AutoTokenizer.from_pretrained(tiny_model_path())
        results = run_sync(capture_experts(select(setup.suite, setup.sft_tasks), ["custom"], tok, concurrency=4))
        print(f"expert capture: {write_dataset(results, dataset)}", flush=True)
    size = Size(harnesses="custom", sft_steps=setup.sft_steps, sft_lr=setup.sft_lr, sft_frozen_layers=0)
    return sft(work, tiny_model_path(), dataset, size)


def run_arm(arm: str, model: Path, setup: Setup, seed: int, out: Path) -> dict[str, Any]:
    """Train one arm to the token budget; rows per step and evaluations at the token checkpoints."""
    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    tasks = select(setup.suite, setup.tasks)
    shape = {"num_generations": 4} if arm == "chain" else {"num_generations": 2, "branching": True, "branch_points": 2}
    cfg = TreeGRPOConfig(
        output_dir=str(out),
        suite=setup.suite,
        harness="custom",
        pairs_per_step=setup.pairs_per_step,
        max_steps=setup.max_steps,
        learning_rate=setup.rl_lr,
        max_completion_length=setup.max_tokens,
        temperature=setup.temperature,
        max_concurrent_episodes=4,
        seed=seed,
        use_cpu=True,
        save_steps=0,
        lr_scheduler_type="constant",
        drop_zero_variance_from_loss=True,
        eval_suite=setup.suite,
        eval_tasks=",".join(t.id for t in tasks),
        eval_episodes=setup.eval_episodes,
        logging_steps=1,
        **shape,
    )
    trainer = TreeGRPOTrainer(cfg, model, tasks=tasks)
    rows: list[dict[str, float]] = []
    evals: list[dict[str, float]] = []
    marks = [setup.budget * (i + 1) / setup.checkpoints for i in range(setup.checkpoints)]
    tokens = 0.0
    t0 = time.perf_counter()
    try:
        while tokens < setup.budget and trainer.step < setup.max_steps:
            [m] = trainer.train(steps=1)[-1:]
            tokens += m.get("generated_tokens", 0.0)
            rows.append(
                {
                    "step": m["step"],
                    "tokens": tokens,
                    "reward": m.get("reward", 0.0),
                    "groups_trained": m.get("groups_trained", 0.0),
                    "loss": m.get("loss", 0.0),
                    "trainable_tokens": m.get("trainable_tokens", 0.0),
                    "seconds": time.perf_counter() - t0,
                }
            )
            while marks and tokens >= marks[0]:
                marks.pop(0)
                e = trainer.evaluate()
                evals.append({"tokens": tokens, "step": m["step"], "reward": e["eval/reward"], "pass_rate": e["eval/pass_rate"]})
                print(
                    f"[{arm} seed {seed}] eval at {tokens:.0f} tokens: reward {e['eval/reward']:.3f} pass {e['eval/pass_rate']:.3f}",
                    flush=True,
                )
    finally:
        trainer.close()
    return {"rows": rows, "evals": evals, "seconds": time.perf_counter() - t0}


def evaluate_start(model: Path, setup: Setup, seed: int, out: Path) -> dict[str, float]:
    """The SFT policy's score on the same evaluation (step 0 of both curves)."""
    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    tasks = select(setup.suite, setup.tasks)
    cfg = TreeGRPOConfig(
        output_dir=str(out),
        suite=setup.suite,
        harness="custom",
        max_steps=1,
        seed=seed,
        use_cpu=True,
        max_completion_length=setup.max_tokens,
        temperature=setup.temperature,
        save_steps=0,
        max_concurrent_episodes=4,
        eval_suite=setup.suite,
        eval_tasks=",".join(t.id for t in tasks),
        eval_episodes=setup.eval_episodes,
    )
    trainer = TreeGRPOTrainer(cfg, model, tasks=tasks)
    try:
        e = trainer.evaluate()
    finally:
        trainer.close()
    return {"tokens": 0.0, "step": 0.0, "reward": e["eval/reward"], "pass_rate": e["eval/pass_rate"]}


def side_by_side(result: dict[str, Any]) -> str:
    """Both arms' evaluation curves, then their training-reward curves, as aligned text tables."""
    lines = [
        f"seed {result['seed']}: eval on fresh episodes of the training tasks (reward / pass rate)",
        f"{'tokens':>8} | {'chain':>15} | {'branching':>15}",
    ]
    start = result["start"]
    lines.append(f"{0:>8} | {start['reward']:6.3f} / {start['pass_rate']:5.3f} | {start['reward']:6.3f} / {start['pass_rate']:5.3f}")
    for c, b in zip(result["chain"]["evals"], result["branching"]["evals"], strict=False):
        lines.append(
            f"{c['tokens']:>4.0f}/{b['tokens']:<4.0f}| {c['reward']:6.3f} / {c['pass_rate']:5.3f} | "
            f"{b['reward']:6.3f} / {b['pass_rate']:5.3f}"
        )
    lines.append("training reward per step (tokens so far: reward)")
    for arm in ARMS:
        rows = result[arm]["rows"]
        varied = sum(r["groups_trained"] for r in rows)  # groups without reward variance are not trained
        lines.append(
            f"{arm:>9}: "
            + "  ".join(f"{r['tokens']:.0f}:{r['reward']:.2f}" for r in rows)
            + f"   ({len(rows)} steps, {result[arm]['seconds']:.0f} s; groups with reward variance: "
            f"{varied:.0f} of {len(rows) * result['setup']['pairs_per_step']})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1", help="Comma-separated seeds; each runs both arms")
    parser.add_argument("--out", type=Path, default=Path("experiments/branching/multistep"))
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="Captures, SFT model, run folders (default experiments/branching/work/<OUT name>, ignored by git)",
    )
    for name in ("suite", "tasks", "sft_tasks", "budget", "sft_steps", "rl_lr", "temperature", "max_tokens", "eval_episodes"):
        default = getattr(Setup, name)
        parser.add_argument(f"--{name}", type=type(default), default=default, help=f"Setup.{name} (default {default})")
    a = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # on a busy 2-core machine two threads made the tiny model's steps ~17x slower
    setup = Setup(**{k: v for k, v in vars(a).items() if k in Setup.__dataclass_fields__})
    work = a.work or Path("experiments/branching/work") / a.out.name
    work.mkdir(parents=True, exist_ok=True)
    a.out.mkdir(parents=True, exist_ok=True)
    model: Path | None = None  # built only when a seed has no results yet: a finished OUT reprints its tables
    for seed in [int(s) for s in a.seeds.split(",")]:
        path = a.out / f"seed-{seed}.json"
        if path.is_file():
            print(side_by_side(json.loads(path.read_text())))
            continue
        model = model or policy(work, setup)
        result: dict[str, Any] = {
            "seed": seed,
            "setup": asdict(setup),
            "model": str(model),
            "command": " ".join(["python", "experiments/branching/compare.py", *(argv or sys.argv[1:])]),
        }
        result["start"] = evaluate_start(model, setup, seed, work / f"eval-{seed}")
        print(f"[seed {seed}] SFT policy: eval reward {result['start']['reward']:.3f} pass {result['start']['pass_rate']:.3f}", flush=True)
        for arm in ARMS:
            result[arm] = run_arm(arm, model, setup, seed, work / f"{arm}-{seed}")
        path.write_text(json.dumps(result, indent=1))
        print(side_by_side(result), flush=True)


if __name__ == "__main__":
    main()
