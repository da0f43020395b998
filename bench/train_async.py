"""Synchronous vs asynchronous rollouts on the CPU demo, side by side in one run (prints, never asserts).

Both runs train the same demo (tiny model, custom harness in bwrap, toy-rl) for the same number
of steps from the same seed; the async run keeps ``max_staleness`` steps of groups sampling
while the trainer steps and drops groups more than ``--max-staleness`` versions old. Printed per
mode: wall seconds per step (steps 2.., the first includes start-up) and how it splits into
waiting on rollouts and training (a train time that grows under async is the trainer sharing
CPU or GIL with the rollouts), the share of lane time the rollout workers sat idle, the
staleness histogram of the groups trained, groups dropped as stale, and the learning curve's
first 5 vs last 5 steps. Flags the bench does not know go to the demo (``demo_cpu.py --help``).

Overlap can at best turn a step of R (rollout) + T (train) seconds into max(R, T): the demo's
default step trains ~6x shorter than it samples, so the honest setting trains comparably long
(``--num-iterations 4``: four optimizer passes per batch, TRL's mu), and ``--rollout-process``
decodes in a child process so that trainer and rollouts do not take turns on one GIL.

    python bench/train_async.py --steps 12 --num-iterations 4 --rollout-process
    python bench/train_async.py                     # demo defaults (in-process policy, mu = 1)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def run(argv: list[str]) -> dict[str, Any]:
    from trainers.scripts.demo_cpu import build, parser

    a = parser().parse_args(argv)
    trainer = build(a)
    stamps: list[float] = []
    rewards: list[float] = []
    idle: list[float] = []
    wait: list[float] = []
    train: list[float] = []
    push: list[float] = []

    def on_step(m: dict[str, float]) -> None:
        stamps.append(time.perf_counter())
        rewards.append(m["reward"])
        idle.append(m.get("rollout_idle_share", 0.0))
        wait.append(m["rollout_s"])
        train.append(m["train_s"])
        push.append(m.get("sync_s", 0.0))

    t0 = time.perf_counter()
    try:
        trainer.train(on_step=on_step)
        stale = trainer.rollouts.groups_stale
        hist = dict(sorted(trainer.rollouts.staleness.items()))
    finally:
        trainer.close()
    steps = [b - a for a, b in zip([t0, *stamps[:-1]], stamps, strict=True)]
    return {"step_s": statistics.mean(steps[1:]) if len(steps) > 1 else steps[0], "first_step_s": steps[0],
            "idle": statistics.mean(idle[1:]) if len(idle) > 1 else idle[0], "hist": hist, "stale": stale, "rewards": rewards,
            "total_s": stamps[-1] - t0, "wait_s": statistics.mean(wait[1:] or wait), "train_s": statistics.mean(train[1:] or train),
            "push_s": statistics.mean(push[1:] or push)}


def main() -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--pairs-per-step", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1, help="sync, async, sync, async, ...: the shared box's load hits both")
    a, demo_flags = p.parse_known_args()  # the rest go to the demo (trainers/scripts/demo_cpu.py --help)
    a.demo_flags = demo_flags
    common = ["--steps", str(a.steps), "--seed", str(a.seed), "--concurrency", str(a.concurrency),
              "--pairs-per-step", str(a.pairs_per_step), *demo_flags]
    for r in range(a.rounds):
        results = {"sync": run(common), "async": run([*common, "--async-rollouts", "--max-staleness", str(a.max_staleness)])}
        report(a, results, r)


def report(a: Any, results: dict[str, dict[str, Any]], r: int) -> None:
    print(f"\nround {r + 1}; demo: {a.steps} steps, {a.pairs_per_step} groups x 4 rollouts per step, {a.concurrency} lanes, seed {a.seed}, "
          f"async max_staleness {a.max_staleness}" + (f"; demo flags {' '.join(a.demo_flags)}" if a.demo_flags else ""))
    print(f"{'':28s}{'sync':>12s}{'async':>12s}")
    s, y = results["sync"], results["async"]
    print(f"{'wall s / step (2..)':28s}{s['step_s']:12.2f}{y['step_s']:12.2f}")
    print(f"{'trainer waits on rollouts s':28s}{s['wait_s']:12.2f}{y['wait_s']:12.2f}")
    print(f"{'train s (incl. weight push)':28s}{s['train_s']:12.2f}{y['train_s']:12.2f}")
    print(f"{'  of which weight push s':28s}{s['push_s']:12.2f}{y['push_s']:12.2f}")
    print(f"{'first step s':28s}{s['first_step_s']:12.2f}{y['first_step_s']:12.2f}")
    print(f"{'total s':28s}{s['total_s']:12.1f}{y['total_s']:12.1f}")
    print(f"{'rollout lanes idle':28s}{s['idle']:12.1%}{y['idle']:12.1%}")
    print(f"{'groups dropped as stale':28s}{s['stale']:12d}{y['stale']:12d}")
    print(f"{'staleness of trained groups':28s}{_hist(s['hist']):>12s}{_hist(y['hist']):>12s}")
    for name, r in results.items():
        k = min(5, len(r["rewards"]))
        first, last = sum(r["rewards"][:k]) / k, sum(r["rewards"][-k:]) / k
        print(f"{name:5s} reward: first {k} steps {first:.3f} -> last {k} steps {last:.3f}")
    print(f"async speed-up per step: {s['step_s'] / y['step_s']:.2f}x")


def _hist(h: dict[int, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in h.items()) or "-"


if __name__ == "__main__":
    main()
