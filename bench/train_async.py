"""Synchronous vs asynchronous rollouts on the CPU demo, side by side in one run (prints, never asserts).

Both arms train the same demo (tiny model, custom harness in bwrap, toy-rl) with the same flags,
seed, number of steps, optimizer passes and rollouts trained per step; the async arm keeps
``--max-staleness`` steps of groups sampling while the trainer steps and drops groups more than
that many versions old. Flags the bench does not know go to the demo (``demo_cpu.py --help``).

Printed per step (means over steps 2.., the first includes start-up), sync vs async: wall
seconds and how they split into waiting on rollouts, training and the weight push; the share of
lane time the rollout workers sat idle; and CPU seconds per process, so a wall figure can be
read on a shared box: the trainer's main thread (its CPU, and the time it was runnable but had
no core: the box's load or our own rollouts), the trainer process's other threads (executor,
proxy), the rollout child (decoding) and the sandboxes (harness and verifier processes: as reaped
children, which misses what runs in a sandbox's pid namespace, and through a cpuacct group around
the process tree, which does not), and all of the rollout side's (other threads + child + sandboxes). Then
the staleness histogram of the groups trained, the groups dropped as stale, and the learning
curve's first 5 vs last 5 steps.

Overlap can at best turn a step of R (rollout) + T (train) seconds into max(R, T). The defaults
are the setting where that is worth measuring on 2 cores: the rollout policy decodes in its own
process (``--rollout-process``: the trainer does not share its GIL), the 8 lanes' calls are
decoded together (``--rollout-max-batch 8``: the rollout side then takes a small share of a core,
so the trainer keeps one), and four optimizer passes per batch (``--num-iterations 4``, TRL's mu)
make T comparable to R. ``--no-defaults`` runs the demo's own defaults instead.

Each arm runs where it is best placed on shared CPUs (both printed): the sync arm on any CPU (its
rollouts take every core while the trainer waits, and its trainer has the cores to itself while
it trains); the async arm with the training thread on the first CPU and the rollout side (event
loop with executor and proxy, policy child, sandboxes) on the others (``--trainer-cpus``,
``--rollout-cpus``, ``trainers/core/cpus.py``): unpinned, the rollout side's processes are
runnable beside the trainer and the scheduler shares the cores among them all, so the trainer,
whose step is the async step, waits for a core. ``--unpinned`` adds that async arm for
comparison.

    python bench/train_async.py                       # 16 steps, the settings above, sync then async
    python bench/train_async.py --rounds 2            # sync, async, sync, async: the box's load hits both
    python bench/train_async.py --unpinned            # and async with every thread on any CPU
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULTS = ["--rollout-process", "--rollout-max-batch", "8", "--num-iterations", "4"]
ROWS = [  # (key, label, format)
    ("wall", "wall s / step (2..)", "{:.2f}"),
    ("wait", "trainer waits on rollouts s", "{:.2f}"),
    ("train", "train s (incl. weight push)", "{:.2f}"),
    ("push", "  of which weight push s", "{:.2f}"),
    ("idle", "rollout lanes idle", "{:.1%}"),
    ("main_cpu", "CPU s: trainer main thread", "{:.2f}"),
    ("main_queue", "  runnable, no core s", "{:.2f}"),
    ("other_cpu", "CPU s: trainer other threads", "{:.2f}"),
    ("child_cpu", "CPU s: rollout child", "{:.2f}"),
    ("sandbox_cpu", "CPU s: sandboxes (reaped)", "{:.2f}"),
    ("tree_cpu", "CPU s: sandboxes (cpuacct)", "{:.2f}"),
    ("rollout_cpu", "CPU s: rollout side, all", "{:.2f}"),
    ("gc", "garbage collection s (trainer)", "{:.3f}"),
]


def _schedstat() -> tuple[float, float]:
    """This thread's (CPU seconds, seconds runnable without a core) from Linux's schedstat; zeros elsewhere."""
    path = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat")
    if not path.exists():
        return 0.0, 0.0
    cpu, queued, _ = path.read_text().split()
    return int(cpu) / 1e9, int(queued) / 1e9


class _GCClock:
    """Wall seconds the trainer process spent in the cyclic garbage collector (any thread)."""

    def __init__(self) -> None:
        self.total, self._t0 = 0.0, 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._t0


def _child_cpu(trainer: Any) -> float:
    import psutil

    pid = getattr(trainer.rollouts._backend, "pid", None)  # ChildHFBackend (--rollout-process) only
    if pid is None:
        return 0.0
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def run(argv: list[str]) -> dict[str, Any]:
    from harness import CPU as tree  # bench/harness.py: a cpuacct group around this process tree

    from trainers.scripts.demo_cpu import build, parser

    a = parser().parse_args(argv)
    trainer = build(a)
    steps: list[dict[str, float]] = []
    rewards: list[float] = []
    trained = 0.0
    gc_clock = _GCClock()
    gc.callbacks.append(gc_clock)

    def snap() -> dict[str, float]:
        t = os.times()
        cpu, queued = _schedstat()
        under = tree.now()
        return {
            "t": time.perf_counter(),
            "proc": t.user + t.system,
            "reaped": t.children_user + t.children_system,
            "child": _child_cpu(trainer),
            "main": cpu,
            "queued": queued,
            "gc": gc_clock.total,
            "tree": under if under is not None else float("nan"),
        }

    last = snap()

    def on_step(m: dict[str, float]) -> None:
        nonlocal last, trained
        now = snap()
        d = {k: now[k] - last[k] for k in now}
        last = now
        rewards.append(m["reward"])
        trained += m.get("rollouts_trained", 0.0)
        steps.append(
            {
                "wall": d["t"],
                "wait": m["rollout_s"],
                "train": m["train_s"],
                "push": m.get("sync_s", 0.0),
                "idle": m.get("rollout_idle_share", 0.0),
                "main_cpu": d["main"],
                "main_queue": d["queued"],
                "other_cpu": d["proc"] - d["main"],
                "child_cpu": d["child"],
                "sandbox_cpu": d["reaped"],
                "gc": d["gc"],
                "tree_cpu": d["tree"] - d["child"],
                "rollout_cpu": d["proc"] - d["main"] + d["tree"],
            }
        )

    try:
        trainer.train(on_step=on_step)
        stale = trainer.rollouts.groups_stale
        hist = dict(sorted(trainer.rollouts.staleness.items()))
    finally:
        trainer.close()
        gc.callbacks.remove(gc_clock)
    rest = steps[1:] or steps
    out: dict[str, Any] = {k: statistics.mean(s[k] for s in rest) for k, _, _ in ROWS}
    out.update(
        first_step_s=steps[0]["wall"],
        total_s=sum(s["wall"] for s in steps),
        hist=hist,
        stale=stale,
        rewards=rewards,
        trained=trained,
        spread=(min(s["wall"] for s in rest), max(s["wall"] for s in rest)),
    )
    return out


def arms(a: Any) -> dict[str, list[str]]:
    """The arms' demo flags: sync on any CPU; async with the trainer and the rollout side on their own CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    stale = ["--async-rollouts", "--max-staleness", str(a.max_staleness)]
    out = {"sync": []}
    if len(cpus) > 1:
        rollout = ",".join(map(str, cpus[1:]))
        out["async"] = [*stale, "--trainer-cpus", str(cpus[0]), "--rollout-cpus", rollout]
        if a.unpinned:
            out["async unpinned"] = stale
    else:
        out["async"] = stale
    return out


def main() -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--pairs-per-step", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1, help="sync, async, sync, async, ...: the shared box's load hits both")
    p.add_argument("--unpinned", action="store_true", help="a third arm: async with every thread on any CPU")
    p.add_argument("--no-defaults", action="store_true", help=f"leave out the bench's demo flags ({' '.join(DEFAULTS)})")
    a, demo_flags = p.parse_known_args()  # the rest go to the demo (trainers/scripts/demo_cpu.py --help); they win
    a.demo_flags = ([] if a.no_defaults else DEFAULTS) + demo_flags
    common = [
        "--steps",
        str(a.steps),
        "--seed",
        str(a.seed),
        "--concurrency",
        str(a.concurrency),
        "--pairs-per-step",
        str(a.pairs_per_step),
        *a.demo_flags,
    ]
    for r in range(a.rounds):
        load = os.getloadavg()[0]
        results = {}
        for name, flags in arms(a).items():
            results[name] = res = run([*common, *flags])
            print(
                f"[round {r + 1}] {name}: {res['wall']:.2f} s/step; trainer main thread {res['main_cpu']:.2f} CPU-s, "
                f"{res['main_queue']:.2f} s runnable without a core; rollout side {res['rollout_cpu']:.2f} CPU-s "
                f"(sandboxes {res['tree_cpu']:.2f}); load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        report(a, results, r, (load, os.getloadavg()[0]))
    from harness import CPU

    CPU.close()


def _cpus_of(flags: list[str]) -> str:
    if "--trainer-cpus" not in flags:
        return "any CPU (the rollout side takes every core while the trainer waits)" if "--async-rollouts" not in flags else "any CPU"
    get = lambda f: flags[flags.index(f) + 1]  # noqa: E731
    return f"trainer thread on CPU {get('--trainer-cpus')}, rollout side (loop, policy child, sandboxes) on {get('--rollout-cpus')}"


def report(a: Any, results: dict[str, dict[str, Any]], r: int, load: tuple[float, float]) -> None:
    print(
        f"\nround {r + 1}; demo: {a.steps} steps, {a.pairs_per_step} groups x 4 rollouts per step, {a.concurrency} lanes, "
        f"seed {a.seed}, async max_staleness {a.max_staleness}; demo flags {' '.join(a.demo_flags) or '-'}; "
        f"load average {load[0]:.1f} -> {load[1]:.1f}"
    )
    for name, flags in arms(a).items():
        print(f"  {name}: {_cpus_of(flags)}")
    names = list(results)
    w = max(12, *(len(n) + 2 for n in names))
    print(f"{'':30s}" + "".join(f"{n:>{w}s}" for n in names))
    col = lambda key, fmt: "".join(f"{fmt.format(results[n][key]):>{w}s}" for n in names)  # noqa: E731
    for key, label, fmt in ROWS:
        print(f"{label:30s}{col(key, fmt)}")
    rng = "{:.2f}-{:.2f}"
    print(f"{'  fastest-slowest step s':30s}" + "".join(f"{rng.format(*results[n]['spread']):>{w}s}" for n in names))
    print(f"{'first step s':30s}{col('first_step_s', '{:.2f}')}")
    print(f"{'total s':30s}{col('total_s', '{:.1f}')}")
    print(f"{'rollouts trained':30s}{col('trained', '{:.0f}')}")
    print(f"{'groups dropped as stale':30s}{col('stale', '{:d}')}")
    print(f"{'staleness of trained groups':30s}" + "".join(f"{_hist(results[n]['hist']):>{w}s}" for n in names))
    for name, res in results.items():
        k = min(5, len(res["rewards"]))
        first, last = sum(res["rewards"][:k]) / k, sum(res["rewards"][-k:]) / k
        print(f"{name} reward: first {k} steps {first:.3f} -> last {k} steps {last:.3f}")
    s = results["sync"]
    bound = (s["wait"] + s["train"]) / max(s["wait"], s["train"])
    print(
        f"overlap bound from the sync arm, (R + T) / max(R, T): {bound:.2f}x "
        f"(R = {s['wait']:.2f} s waiting on rollouts, T = {s['train']:.2f} s training)"
    )
    for name in names[1:]:
        print(f"{name} speed-up per step over sync: {s['wall'] / results[name]['wall']:.2f}x", flush=True)


def _hist(h: dict[int, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in h.items()) or "-"


if __name__ == "__main__":
    main()
