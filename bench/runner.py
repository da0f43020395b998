"""Benchmark runner throughput: episodes per minute through each harness at concurrency 1, 4, 16.

A scripted policy (no model cost) drives the real path: proxy -> harness in a bwrap sandbox ->
verifier, over the clawgym-original smoke tasks. The custom harness gets the smoke policy
(one tool call, then done); Claude Code and OpenClaw get a policy that answers "Done." at once,
so their figures are harness start-up + one model round trip + verifier. Prints figures, asserts
nothing.

    python bench/runner.py [--harness custom,claude-code,openclaw] [--concurrency 1,4,16] [--episodes 16]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import tempfile
from pathlib import Path

from clawgym_env.errors import ClawGymError
from clawgym_env.harness_install import cache_root
from clawgym_env.harness_registry import load_harness
from clawgym_env.runner import RunConfig, run_benchmark

ROOT = Path(__file__).resolve().parent.parent
SMOKE_POLICY = ROOT / "tests" / "clawgym_env" / "runner" / "smoke_policy.yaml"
PHASES = ("sandbox", "harness", "model", "verifier")


async def one(harness: str, concurrency: int, episodes: int, policy: Path, tasks: str, work: Path) -> str:
    n_tasks = 6 if tasks == "smoke-*" else 1
    cfg = RunConfig(
        model=f"scripted:{policy}",
        harnesses=[harness],
        suite="clawgym-original",
        tasks=tasks,
        attempts=max(1, math.ceil(episodes / n_tasks)),
        concurrency=concurrency,
        out=str(work / f"{harness}-c{concurrency}"),
    )
    s = await run_benchmark(cfg, progress=False)
    n = len(s.attempts)
    mean = {p: sum(a.timings.get(p, 0.0) for a in s.attempts) / n for p in (*PHASES, "total")}
    other = mean["total"] - mean["sandbox"] - mean["harness"] - mean["verifier"]
    eps = 60 * s.ran / s.elapsed_s
    errs = s.metrics.overall.errors + s.metrics.overall.timeouts
    return (
        f"{harness:12s} {concurrency:>4d} {n:>5d} {s.elapsed_s:8.1f} {eps:9.1f} {mean['total']:7.2f} "
        f"{mean['sandbox']:7.2f} {mean['harness'] - mean['model']:8.2f} {mean['model']:6.2f} "
        f"{mean['verifier']:8.2f} {other:6.2f} {errs:4d} {s.metrics.overall.mean_score:6.2f} "
        f"{os.getloadavg()[0]:5.1f}"
    )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harness", default="custom,claude-code,openclaw")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--episodes", type=int, default=16, help="Episodes per (harness, concurrency).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="clawgym-bench-runner-") as d:
        work = Path(d)
        done_policy = work / "done.yaml"
        done_policy.write_text('default: "Done."\n')
        print(
            "episode time split (mean seconds per episode): harness-start = harness process time minus time in the "
            "model backend; other = proxy session, capture, workspace bookkeeping"
        )
        print(f"load = 1-min load average on {os.cpu_count()} CPUs when the row finished (the machine may be shared)")
        print(
            f"{'harness':12s} {'conc':>4s} {'eps':>5s} {'wall s':>8s} {'eps/min':>9s} {'total':>7s} {'sandbox':>7s} "
            f"{'harn-run':>8s} {'model':>6s} {'verifier':>8s} {'other':>6s} {'err':>4s} {'score':>6s} {'load':>5s}"
        )
        for h in args.harness.split(","):
            try:
                load_harness(h).mounts(cache_root())
            except ClawGymError as exc:
                print(f"{h:12s} not usable ({exc}): `clawgym harness install {h}`")
                continue
            policy, tasks = (SMOKE_POLICY, "smoke-*") if h == "custom" else (done_policy, "smoke-hello-file-p0")
            for c in (int(x) for x in args.concurrency.split(",")):
                print(await one(h, c, args.episodes, policy, tasks, work), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
