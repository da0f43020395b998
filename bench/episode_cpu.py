"""Where one episode's CPU and wall go, step by step (bwrap; scripted policy; prints, never asserts).

    python bench/episode_cpu.py [--n 20] [--harness custom,claude-code]

Each step below runs ``--n`` times, the steps interleaved round by round so the box's load touches
all alike; printed per step: median wall and median CPU seconds, split into this process (the
host side: asyncio, the proxy, sandbox bookkeeping) and every process under it (sandboxed
processes included: a cpuacct cgroup around this process tree, as in ``bench/harness.py``). CPU is
what decides how many episodes 2 cores turn over; wall decides one episode's latency.

Steps: a sandbox's start + close (its folders and cgroup); one ``exec(["true"])`` in it without and
with the proxy bridge; one ``python3 -I -S -c pass`` (an interpreter's start inside); the sealed
grading of the h6-smoke hello-file task as an episode does it (``EarlyGrading`` started, then
``grade_final``, then closed); and whole episodes of each harness (``run_episode``) with the harness
process run natively beside them (what ``bench/harness.py`` compares).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import CPU, _spec, native, one  # noqa: E402  (bench/harness.py: the same episode and native run)

from clawgym_env.sandbox import SandboxConfig, create_sandbox  # noqa: E402

Step = Callable[[], Awaitable[object]]


async def _measure(step: Step) -> tuple[float, float, float]:
    """(wall s, this process's CPU s, CPU s of the processes under it) of one run of ``step``."""
    c0, p0, t0 = CPU.now(), time.process_time(), time.perf_counter()
    await step()
    wall, own = time.perf_counter() - t0, time.process_time() - p0
    c1 = CPU.now()
    return wall, own, (c1 - c0) if c0 is not None and c1 is not None else float("nan")


def _steps(harnesses: list[str], proxy: object, sock: Path, cache: Path) -> dict[str, Step]:
    spec = _spec()
    plain = SandboxConfig(workspace_src=spec.workspace_dir, workspace_mount=spec.workspace_mount, memory_mb=1024)
    bridged = SandboxConfig(workspace_src=spec.workspace_dir, workspace_mount=spec.workspace_mount, memory_mb=1024, proxy_socket=sock)

    async def start_close() -> None:
        async with create_sandbox("bwrap", plain):
            pass

    def exec_in(cfg: SandboxConfig, cmd: list[str]) -> Step:
        async def run() -> None:
            async with create_sandbox("bwrap", cfg) as sb:
                r = await sb.exec(cmd, timeout=60)
                assert r.return_code == 0, r

        return run

    async def grading() -> None:
        from clawgym_env.grading import make_transcript
        from clawgym_env.grading.grade import EarlyGrading, grade_final

        async with create_sandbox("bwrap", plain) as sb:
            r = await sb.exec(["sh", "-c", "echo 'hello world' > hello.txt"], timeout=60)
            assert r.return_code == 0, r
            early = await EarlyGrading.start(spec, sb)
            try:
                vr, _ = await grade_final(spec, sb, make_transcript(spec, "done"), early=early)
                assert vr.score == 1.0, vr
            finally:
                if early is not None:
                    await early.close()

    steps: dict[str, Step] = {
        "sandbox start + close": start_close,
        "  + exec true": exec_in(plain, ["true"]),
        "  + exec true, proxy bridge": exec_in(bridged, ["true"]),
        "  + exec python3 -I -S -c pass": exec_in(plain, ["python3", "-I", "-S", "-c", "pass"]),
        "  + write file, sealed grading": grading,
    }
    for h in harnesses:
        steps[f"{h}: native harness process"] = lambda h=h: native(h, proxy, cache)
        steps[f"{h}: whole episode"] = lambda h=h: one(h, proxy)
    return steps


async def main(a: argparse.Namespace) -> None:
    from clawgym_env.proxy import ProxyServer

    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; n = {a.n} per step, steps interleaved; "
        "medians; CPU of processes under this one: cpuacct" + ("" if CPU.now() is not None else " (unavailable)")
    )
    with tempfile.TemporaryDirectory() as d:
        async with ProxyServer(uds_path=Path(d) / "proxy.sock") as proxy:
            steps = _steps(a.harness.split(",") if a.harness else [], proxy, Path(d) / "proxy.sock", Path(d) / "cc")
            for step in steps.values():  # warm-up: the bwrap probe, shared /etc, page cache, compile caches
                await step()
            got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in steps}
            for _ in range(a.n):
                for name, step in steps.items():
                    got[name].append(await _measure(step))
    print(f"{'step':42s} {'wall ms':>8s} {'CPU ms':>8s} {'host':>7s} {'under':>7s}")
    for name, rows in got.items():
        wall, own, under = (statistics.median(r[i] for r in rows) * 1000 for i in range(3))
        print(f"{name:42s} {wall:8.1f} {own + under:8.1f} {own:7.1f} {under:7.1f}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    CPU.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20)
    p.add_argument("--harness", default="custom,claude-code")
    asyncio.run(main(p.parse_args()))
