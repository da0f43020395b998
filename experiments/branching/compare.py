"""Tree GRPO with branching vs without, at the same generated-token budget, on the Pass@1 suite.

    nice -n 10 python experiments/branching/compare.py --seeds 0,1      # results in experiments/branching/

Policy: the tiny Qwen3-architecture model (``clawgym_env.models.tiny``) after a short tree SFT on
verified expert episodes of a few ``procgen-train`` templates through the custom harness (the
Pass@1 experiment's ``capture`` and ``sft`` stages), so that its own episodes have rewards with
variance. (The experiment's SmolLM2-135M costs ~40 s per 600-token forward+backward and ~20 s per
32-token call on this shared 2-core box: four RL runs of it do not fit a session.)

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

    tasks: str = "[wad]*-0[1-4]"
    """write-number, append-line, delete-file: variants 01-04 (the only templates starting w, a, d)."""
    sft_steps: int = 80
    sft_lr: float = 1e-2
    rl_lr: float = 1e-3
    pairs_per_step: int = 2
    max_tokens: int = 48
    temperature: float = 1.0
    budget: int = 2400
    checkpoints: int = 3
    eval_episodes: int = 1
    max_steps: int = 40


def select(pattern: str) -> list[Any]:
    from clawgym_env.task import load_suite

    return load_suite("procgen-train").select(pattern)


def policy(work: Path, setup: Setup) -> Path:
    """The SFT'd tiny model (cached in ``work``)."""
    from clawgym_env.models import tiny_model_path
    from trainers.scripts.experiment_pass1 import Size, capture, sft

    size = Size(harnesses="custom", train_tasks=setup.tasks, sft_steps=setup.sft_steps, sft_lr=setup.sft_lr)
    dataset = capture(work, tiny_model_path(), size)
    return sft(work, tiny_model_path(), dataset, size)


def run_arm(arm: str, model: Path, setup: Setup, seed: int, out: Path) -> dict[str, Any]:
    """Train one arm to the token budget; rows per step and evaluations at the token checkpoints."""
    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    tasks = select(setup.tasks)
    shape = {"num_generations": 4} if arm == "chain" else {"num_generations": 2, "branching": True, "branch_points": 2}
    cfg = TreeGRPOConfig(output_dir=str(out), suite="procgen-train", harness="custom", pairs_per_step=setup.pairs_per_step,
                         max_steps=setup.max_steps, learning_rate=setup.rl_lr, max_completion_length=setup.max_tokens,
                         temperature=setup.temperature, max_concurrent_episodes=4, seed=seed, use_cpu=True, save_steps=0,
                         lr_scheduler_type="constant", skip_zero_variance=True, eval_suite="procgen-train",
                         eval_tasks=",".join(t.id for t in tasks), eval_episodes=setup.eval_episodes, logging_steps=1, **shape)
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
            rows.append({"step": m["step"], "tokens": tokens, "reward": m.get("reward", 0.0),
                         "groups_trained": m.get("groups_trained", 0.0), "loss": m.get("loss", 0.0),
                         "trainable_tokens": m.get("trainable_tokens", 0.0), "seconds": time.perf_counter() - t0})
            while marks and tokens >= marks[0]:
                marks.pop(0)
                e = trainer.evaluate()
                evals.append({"tokens": tokens, "step": m["step"], "reward": e["eval/reward"], "pass_rate": e["eval/pass_rate"]})
                print(f"[{arm} seed {seed}] eval at {tokens:.0f} tokens: reward {e['eval/reward']:.3f} "
                      f"pass {e['eval/pass_rate']:.3f}", flush=True)
    finally:
        trainer.close()
    return {"rows": rows, "evals": evals, "seconds": time.perf_counter() - t0}


def evaluate_start(model: Path, setup: Setup, seed: int, out: Path) -> dict[str, float]:
    """The SFT policy's score on the same evaluation (step 0 of both curves)."""
    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    tasks = select(setup.tasks)
    cfg = TreeGRPOConfig(output_dir=str(out), suite="procgen-train", harness="custom", max_steps=1, seed=seed, use_cpu=True,
                         max_completion_length=setup.max_tokens, temperature=setup.temperature, save_steps=0,
                         max_concurrent_episodes=4, eval_suite="procgen-train", eval_tasks=",".join(t.id for t in tasks),
                         eval_episodes=setup.eval_episodes)
    trainer = TreeGRPOTrainer(cfg, model, tasks=tasks)
    try:
        e = trainer.evaluate()
    finally:
        trainer.close()
    return {"tokens": 0.0, "step": 0.0, "reward": e["eval/reward"], "pass_rate": e["eval/pass_rate"]}


def side_by_side(result: dict[str, Any]) -> str:
    """Both arms' evaluation curves, then their training-reward curves, as aligned text tables."""
    lines = [f"seed {result['seed']}: eval on fresh episodes of the training tasks (reward / pass rate)",
             f"{'tokens':>8} | {'chain':>15} | {'branching':>15}"]
    start = result["start"]
    lines.append(f"{0:>8} | {start['reward']:6.3f} / {start['pass_rate']:5.3f} | {start['reward']:6.3f} / {start['pass_rate']:5.3f}")
    for c, b in zip(result["chain"]["evals"], result["branching"]["evals"], strict=False):
        lines.append(f"{c['tokens']:>4.0f}/{b['tokens']:<4.0f}| {c['reward']:6.3f} / {c['pass_rate']:5.3f} | "
                     f"{b['reward']:6.3f} / {b['pass_rate']:5.3f}")
    lines.append("training reward per step (tokens so far: reward)")
    for arm in ARMS:
        rows = result[arm]["rows"]
        lines.append(f"{arm:>9}: " + "  ".join(f"{r['tokens']:.0f}:{r['reward']:.2f}" for r in rows)
                     + f"   ({len(rows)} steps, {result[arm]['seconds']:.0f} s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1", help="Comma-separated seeds; each runs both arms")
    parser.add_argument("--out", type=Path, default=Path("experiments/branching"))
    parser.add_argument("--work", type=Path, default=None, help="Captures, SFT model, run folders (default OUT/work, ignored by git)")
    parser.add_argument("--budget", type=int, default=Setup.budget, help="Generated tokens per arm")
    parser.add_argument("--sft_steps", type=int, default=Setup.sft_steps, help="Tree SFT steps of the starting policy")
    parser.add_argument("--eval_episodes", type=int, default=Setup.eval_episodes, help="Episodes per task at each evaluation")
    a = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # on the shared 2-core box two threads made the tiny model's steps ~17x slower
    setup = Setup(budget=a.budget, sft_steps=a.sft_steps, eval_episodes=a.eval_episodes)
    work = a.work or a.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    a.out.mkdir(parents=True, exist_ok=True)
    model = policy(work, setup)
    for seed in [int(s) for s in a.seeds.split(",")]:
        path = a.out / f"seed-{seed}.json"
        if path.is_file():
            print(side_by_side(json.loads(path.read_text())))
            continue
        result: dict[str, Any] = {"seed": seed, "setup": asdict(setup), "model": str(model),
                                  "command": " ".join(["python", "experiments/branching/compare.py", *(argv or sys.argv[1:])])}
        result["start"] = evaluate_start(model, setup, seed, work / f"eval-{seed}")
        print(f"[seed {seed}] SFT policy: eval reward {result['start']['reward']:.3f} pass {result['start']['pass_rate']:.3f}",
              flush=True)
        for arm in ARMS:
            result[arm] = run_arm(arm, model, setup, seed, work / f"{arm}-{seed}")
        path.write_text(json.dumps(result, indent=1))
        print(side_by_side(result), flush=True)


if __name__ == "__main__":
    main()
