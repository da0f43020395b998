"""Sandbox latency and concurrency per backend.

    python bench/sandbox.py [--backends bwrap,docker] [--n 40] [--concurrent 200] [--docker-concurrent 20]
                            [--grading-n 20] [--only-grading]

Per backend: start+stop latency (no process; with and without a cgroup for limits), start + one ``exec(["true"])`` + stop (the cost of
one minimal episode), and the exec latency with the proxy bridge (bwrap: the host-side listener, socat and the
python fallback forwarder; docker: socat). Then N concurrent short episodes (start, write+read a workspace file,
stop), all at once: wall time and failures. Then what sealed grading costs per episode, on a
shipped code-verified and a script-verified task: ``verify`` (reap the agent's sandbox, grade its
final workspace in a fresh sealed sandbox: on bwrap its layers stacked without a copy), the same
with the workspace copied out first (``grade_final(copy_to=...)``: docker always, bwrap when an
episode saves its workspace), against running the same verifiers in an already open sandbox (what
grading in place cost before), interleaved; the median of the paired differences is what sealing adds.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from clawgym_env.sandbox import SandboxConfig, create_sandbox


def _fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return f"median {statistics.median(xs) * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   (n={len(xs)})"


async def _start_stop(backend: str, cfg: SandboxConfig, n: int, run_true: bool) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        sb = create_sandbox(backend, cfg)
        await sb.start()
        if run_true:
            r = await sb.exec(["true"])
            assert r.return_code == 0, r
        await sb.close()
        out.append(time.perf_counter() - t0)
    return out


async def _exec_latency(backend: str, cfg: SandboxConfig, n: int, bridge: str | None = None) -> list[float]:
    out = []
    async with create_sandbox(backend, cfg) as sb:
        if bridge is not None:
            sb._bridge_kind = bridge  # type: ignore[attr-defined]
        for _ in range(n):
            t0 = time.perf_counter()
            r = await sb.exec(["true"])
            assert r.return_code == 0, r
            out.append(time.perf_counter() - t0)
    return out


async def _episode(backend: str, cfg: SandboxConfig, i: int) -> bool:
    async with create_sandbox(backend, cfg) as sb:
        r = await sb.exec(["sh", "-c", f"echo {i} > id && cat id"], timeout=120)
        return r.return_code == 0 and r.stdout.strip() == str(i)


async def _concurrent(backend: str, cfg: SandboxConfig, n: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    results = await asyncio.gather(*(_episode(backend, cfg, i) for i in range(n)), return_exceptions=True)
    failures = sum(1 for r in results if r is not True)
    for r in results:
        if isinstance(r, BaseException):
            print(f"    failure: {type(r).__name__}: {r}")
            break
    return time.perf_counter() - t0, failures


async def _grading(backend: str, task: str, n: int) -> tuple[list[float], list[float], list[float]]:
    """(sealed ``verify`` per episode, the same with the workspace copied out first (what bwrap did
    before zero-copy grading; docker always does), the same verifiers run in one already open sealed sandbox)."""
    from clawgym_env.grading import make_transcript, verify
    from clawgym_env.grading.grade import grade_final
    from clawgym_env.grading.verify import run_verifiers
    from clawgym_env.sandbox import Mount
    from clawgym_env.task import load_suite

    spec = load_suite(Path(__file__).resolve().parents[1] / "tasks" / "clawgym-original").get(task)
    transcript = make_transcript(spec, "done")
    cfg = SandboxConfig(workspace_src=spec.workspace_dir, workspace_mount=spec.workspace_mount, memory_mb=spec.limits.memory_mb)
    sealed, copied, inplace = [], [], []
    assert spec.hidden_dir is not None
    open_cfg = SandboxConfig(
        workspace_src=spec.workspace_dir,
        workspace_mount=spec.workspace_mount,
        sealed=True,
        memory_mb=spec.limits.memory_mb,
        mounts=(Mount(spec.hidden_dir, spec.hidden_mount),),
    )
    async with create_sandbox(backend, open_cfg) as opened:
        for _ in range(n):  # interleaved, so load drifts touch all three alike
            async with create_sandbox(backend, cfg) as sb:
                t0 = time.perf_counter()
                await verify(spec, sb, transcript)
                sealed.append(time.perf_counter() - t0)
            with tempfile.TemporaryDirectory(prefix="clawgym-bench-") as tmp:
                async with create_sandbox(backend, cfg) as sb:
                    t0 = time.perf_counter()
                    await grade_final(spec, sb, transcript, copy_to=Path(tmp) / "ws")
                    copied.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await run_verifiers(spec, opened, transcript)
            inplace.append(time.perf_counter() - t0)
    return sealed, copied, inplace


async def main(args: argparse.Namespace) -> None:
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    tmp = Path(tempfile.mkdtemp(prefix="clawgym-bench-"))
    src = tmp / "ws"
    src.mkdir()
    for i in range(20):
        (src / f"f{i}.txt").write_text("x" * 1000)
    sock = tmp / "proxy.sock"
    server = await asyncio.start_unix_server(lambda r, w: w.close(), str(sock))
    try:
        for backend in args.backends.split(","):
            cfg = SandboxConfig(workspace_src=src, memory_mb=512, pids=128)
            print(f"\n== {backend}")
            try:
                await _start_stop(backend, cfg, 1, True)  # warm-up (probe, image)
            except Exception as exc:
                print(f"  unavailable: {exc}")
                continue
            for task in ("smoke-hello-file-p0", "tmp-cleanup-script"):
                sealed, copied, inplace = await _grading(backend, task, args.grading_n)
                # paired: each iteration's sealed run minus its own verifiers-only run
                added = statistics.median(a - b for a, b in zip(sealed, inplace, strict=True))
                added_copy = statistics.median(a - b for a, b in zip(copied, inplace, strict=True))
                pad = " " * (len(task) + 10)
                print(f"  grading {task}: sealed verify {_fmt(sealed)}")
                print(f"{pad}copied out first {_fmt(copied)}   added: {added_copy * 1000:.1f} ms")
                print(f"{pad}verifiers only {_fmt(inplace)}   added by sealing: {added * 1000:.1f} ms")
            if args.only_grading:
                continue
            print(f"  start+stop            {_fmt(await _start_stop(backend, cfg, args.n, False))}")
            bare = SandboxConfig(workspace_src=src, memory_mb=None, pids=None)
            print(f"  start+stop, no limits {_fmt(await _start_stop(backend, bare, args.n, False))}")
            print(f"  start+exec(true)+stop {_fmt(await _start_stop(backend, cfg, args.n, True))}")
            print(f"  exec(true)            {_fmt(await _exec_latency(backend, cfg, args.n))}")
            pcfg = SandboxConfig(workspace_src=src, memory_mb=512, pids=128, proxy_socket=sock, proxy_port=18080)
            if backend == "bwrap":
                print(f"  exec, host bridge     {_fmt(await _exec_latency(backend, pcfg, args.n, 'host'))}")
                print(f"  exec, socat bridge    {_fmt(await _exec_latency(backend, pcfg, args.n, 'socat'))}")
                print(f"  exec, python bridge   {_fmt(await _exec_latency(backend, pcfg, args.n, 'python'))}")
            else:
                print(f"  exec, bridge          {_fmt(await _exec_latency(backend, pcfg, args.n))}")
            n = args.concurrent if backend != "docker" else args.docker_concurrent
            wall, failures = await _concurrent(backend, cfg, n)
            print(f"  {n} concurrent episodes: {wall:.2f} s wall, {failures} failures")
    finally:
        server.close()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", default="bwrap,docker")
    p.add_argument("--n", type=int, default=40)
    p.add_argument("--concurrent", type=int, default=200)
    p.add_argument("--docker-concurrent", type=int, default=20)
    p.add_argument("--grading-n", type=int, default=20)
    p.add_argument("--only-grading", action="store_true", help="Only the sealed-grading figures.")
    asyncio.run(main(p.parse_args()))
