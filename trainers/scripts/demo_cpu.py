"""CPU demo: tree GRPO moves the reward of a tiny model through a real harness in minutes.

The tiny random Qwen3-architecture model answers through the custom agent loop, in bwrap
sandboxes, behind the proxy; the toy-rl suite rewards short answers (``say-short``) and digit-only
answers (``say-digits``). Everything on the path is the real one (sandbox, harness, proxy capture,
prefix tree, packed forward, AdamW, weight sync); only the model and the tasks are toys.

    python trainers/scripts/demo_cpu.py                 # ~25 steps, a few minutes on 2 cores
    python trainers/scripts/demo_cpu.py --steps 40 --tasks say-short,say-digits
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

SUITE = Path(__file__).resolve().parents[1] / "suites" / "toy-rl"


def curve_line(step: int, reward: float, avg: float, width: int = 40) -> str:
    """One printed line of the learning curve: the step's mean reward, a bar, the running average."""
    bar = "#" * round(reward * width)
    return f"step {step:3d}  reward {reward:.3f}  avg5 {avg:.3f}  |{bar:<{width}}|"


def parser() -> argparse.ArgumentParser:
    """The demo's flags (``bench/train_async.py`` reuses them)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algo", choices=["grpo", "ppo"], default="grpo")
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--tasks", default="say-short")
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--pairs-per-step", type=int, default=2)
    p.add_argument("--learning-rate", type=float, default=1e-2)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--loss-type", default="grpo")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--async-rollouts", action="store_true", help="sample the next groups while the trainer steps")
    p.add_argument("--max-staleness", type=int, default=1, help="with --async-rollouts: drop groups older than this")
    p.add_argument("--concurrency", type=int, default=8, help="episodes in flight (max_concurrent_episodes)")
    p.add_argument(
        "--rollout-max-batch",
        type=int,
        default=1,
        help="calls the in-process backend decodes together; 1 keeps a seeded run bit-for-bit the same (a batch "
        "changes rollout logprobs by ~1e-8 with its composition, and the curve drifts after ~15 steps)",
    )
    p.add_argument("--num-iterations", type=int, default=1, help="optimizer passes over each step's batch (TRL's mu)")
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local: rollouts in this process; ray: in a Ray worker process (a local one-node cluster)",
    )
    p.add_argument(
        "--rollout-process", action="store_true", help="the rollout policy decodes in a child process (not on the trainer's GIL)"
    )
    p.add_argument("--trainer-cpus", default=None, help="CPU ids the training thread runs on, e.g. 0 (default: any)")
    p.add_argument(
        "--rollout-cpus", default=None, help="CPU ids the rollout side (loop, policy child, sandboxes) runs on, e.g. 1 (default: any)"
    )
    p.add_argument("--output-dir", default=None)
    return p


def build(a: argparse.Namespace) -> Any:
    """The demo's trainer for parsed flags ``a``."""
    from clawgym_env.models import tiny_model_path

    out = a.output_dir or tempfile.mkdtemp(prefix="clawgym-demo-")
    if a.algo == "ppo":
        from trainers.tree_ppo.config import TreePPOConfig as Config
        from trainers.tree_ppo.trainer import TreePPOTrainer as Trainer
    else:
        from trainers.tree_grpo.config import TreeGRPOConfig as Config  # type: ignore[assignment]  # the GRPO pair under the same names
        from trainers.tree_grpo.trainer import TreeGRPOTrainer as Trainer  # type: ignore[assignment]  # the GRPO pair under the same names
    extra = {"value_warmup_steps": 2, "value_learning_rate": 3e-3} if a.algo == "ppo" else {"drop_zero_variance_from_loss": True}
    if a.async_rollouts:
        extra.update(async_rollouts=True, max_staleness=a.max_staleness)
    cfg = Config(
        output_dir=out,
        suite=str(SUITE),
        tasks=a.tasks,
        harness="custom",
        num_generations=a.num_generations,
        pairs_per_step=a.pairs_per_step,
        max_completion_length=a.max_tokens,
        learning_rate=a.learning_rate,
        lr_scheduler_type="constant",
        loss_type=a.loss_type,
        max_steps=a.steps,
        save_steps=0,
        seed=a.seed,
        logging_steps=10_000,
        max_concurrent_episodes=a.concurrency,
        num_iterations=a.num_iterations,
        executor=a.executor,
        rollout_process=a.rollout_process,
        trainer_cpus=a.trainer_cpus,
        rollout_cpus=a.rollout_cpus,
        rollout_backend=f"hf:{tiny_model_path()}?max_batch={a.rollout_max_batch}&seed={a.seed}",
        **extra,
    )
    return Trainer(cfg, tiny_model_path())


def main(argv: list[str] | None = None) -> list[float]:
    a = parser().parse_args(argv)
    trainer = build(a)
    rewards: list[float] = []
    t0 = time.perf_counter()
    print(
        f"tree {a.algo.upper()}, tiny model, custom harness in bwrap; tasks {a.tasks}; {a.num_generations} rollouts x "
        f"{a.pairs_per_step} groups per step" + (f"; async rollouts, max staleness {a.max_staleness}" if a.async_rollouts else ""),
        flush=True,
    )

    mismatches: list[float] = []

    def on_step(m: dict[str, float]) -> None:  # the same seed prints the same lines (no timings, no ~1e-8 noise)
        rewards.append(m["reward"])
        mismatches.append(m.get("mismatch", 0.0))
        avg = sum(rewards[-5:]) / len(rewards[-5:])
        print(curve_line(int(m["step"]), m["reward"], avg), flush=True)

    try:
        trainer.train(on_step=on_step)
    finally:
        trainer.close()
    k = max(1, min(5, len(rewards) // 3))
    first, last = sum(rewards[:k]) / k, sum(rewards[-k:]) / k
    print(
        f"mean reward: first {k} steps {first:.3f} -> last {k} steps {last:.3f} ({len(rewards)} steps, seed {a.seed}); "
        f"trainer/sampler logprob mismatch < 1e-6 on every step: {all(x < 1e-6 for x in mismatches)}"
    )
    print(f"took {time.perf_counter() - t0:.0f}s", flush=True)
    return rewards


if __name__ == "__main__":
    main()
