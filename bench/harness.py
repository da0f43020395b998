"""Harness benchmark: episode wall time, peak memory and concurrency per harness (scripted policy).

    python bench/harness.py [--harness custom,claude-code,openclaw] [--repeats 3] [--concurrency 1,2,4,8]

Each episode is the h6-smoke ``hello-file`` task (2 model calls: write the file, say done) in a
bwrap sandbox, served by a ScriptedBackend, so the numbers are the harness + sandbox + proxy cost
with a zero-latency model. Peak memory is the summed RSS of every process started under this
one (the harness and its sandbox), sampled every 50 ms. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import psutil

SUITE = Path(__file__).resolve().parents[1] / "tests" / "harnesses" / "tasks" / "h6-smoke"
WRITE = {"claude-code": ("Write", "file_path", "/workspace/hello.txt"), "openclaw": ("write", "path", "hello.txt"),
         "custom": ("write", "path", "hello.txt")}


class PeakRSS:
    """Samples the summed RSS of this process's descendants in a thread."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process(os.getpid())
        while not self._stop.is_set():
            total = 0
            for p in me.children(recursive=True):
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(0.05)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def backend(harness: str) -> Any:
    from clawgym_env.proxy import ScriptedBackend

    tool, arg, path = WRITE[harness]
    return ScriptedBackend([{"tool_calls": [{"name": tool, "arguments": {arg: path, "content": "hello world\n"}}]}],
                           default="Done.")


async def one(harness: str, proxy: Any) -> Any:
    from clawgym_env.episode import run_episode
    from clawgym_env.task import load_suite

    spec = load_suite(SUITE).get("hello-file")
    return await run_episode(spec, harness, backend(harness), proxy=proxy)


async def bench(harness: str, repeats: int, levels: list[int]) -> None:
    import tempfile

    from clawgym_env.proxy import ProxyServer

    with tempfile.TemporaryDirectory() as d:
        async with ProxyServer(uds_path=Path(d) / "proxy.sock") as proxy:
            walls, peaks, ok = [], [], 0
            for _ in range(repeats):
                with PeakRSS() as mem:
                    t0 = time.perf_counter()
                    r = await one(harness, proxy)
                    walls.append(time.perf_counter() - t0)
                peaks.append(mem.peak)
                ok += r.status == "completed" and r.score == 1.0
            print(f"{harness:12} sequential: {ok}/{repeats} ok, wall median {statistics.median(walls):.2f} s "
                  f"(min {min(walls):.2f}, max {max(walls):.2f}), peak RSS median {statistics.median(peaks) / 2**20:.0f} MiB")
            avail = psutil.virtual_memory().available
            print(f"{harness:12} memory bound: ~{int(avail / max(peaks))} concurrent episodes in {avail / 2**30:.1f} GiB available")
            for k in levels:
                with PeakRSS() as mem:
                    t0 = time.perf_counter()
                    results = await asyncio.gather(*(one(harness, proxy) for _ in range(k)))
                    wall = time.perf_counter() - t0
                good = sum(r.status == "completed" and r.score == 1.0 for r in results)
                print(f"{harness:12} concurrency {k:3}: {good}/{k} ok in {wall:.1f} s ({k / wall:.2f} episodes/s), "
                      f"peak RSS {mem.peak / 2**20:.0f} MiB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harness", default="custom,claude-code,openclaw")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--concurrency", default="1,2,4,8")
    a = p.parse_args()
    print(f"machine: {psutil.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM")
    for h in a.harness.split(","):
        asyncio.run(bench(h, a.repeats, [int(x) for x in a.concurrency.split(",")]))


if __name__ == "__main__":
    main()
