"""Harness benchmark: each harness native vs in-project, wall time and peak memory (scripted policy).

    python bench/harness.py [--harness custom,codex,...] [--repeats 3] [--concurrency 1,2,4,8]

The target's figures (idle machine): ``python3 bench/harness.py --repeats 3`` (every registered harness; a closing
table puts them side by side; ~6 min without OpenClaw, whose ~40 s episodes idle are best run apart:
``--harness openclaw --repeats 2``).

Each episode is the h6-smoke ``hello-file`` task (2 model calls: write the file, say done) served by
a ScriptedBackend, so the numbers are the harness + sandbox + proxy cost with a zero-latency model.
Each harness writes with its own tool (``WRITE``) or, offering only a shell, with that (``SHELL_WRITE``);
mini-swe-agent ends on its submit command (``SUBMIT``).
"native" runs the adapter's own command and environment on the host, outside any sandbox, with
its install paths mapped from /opt/clawgym/... to where they are installed, against the same proxy
over TCP: the harness's own cost. "in-project" is ``run_episode`` (bwrap sandbox, proxy over its
socket, grading); its harness phase is the same process inside the sandbox. The two alternate, so
they see the same machine load. Peak memory is the summed RSS of every process started under this
one, sampled every 50 ms. CPU is that of every process but this one (which serves the proxy in both):
for native runs the reaped children's rusage; for in-project runs a cpuacct cgroup around this
process tree, where one can be made (sandboxed processes are not reaped by us, so rusage misses
them), else "n/a". Prints figures; asserts nothing.

What the comparison holds (printed too): native is the harness process, with the adapter's own
command line and flags (custom: ``python3 -I -S agent.py``, the same system python), then its proxy
session closed and the task's ``grade()`` called in this process (``grade_natively``): no sandbox,
no workspace seeding, no grading process. In-project is a whole episode: sandbox start, the harness
in bwrap (behind the proxy bridge), the proxy session closed, the sealed grading sandbox (started
while the harness runs, used after every agent process is dead) and cleanup. The spare launchers each
sandbox takes (``clawgym_env.sandbox._bwrap_spare``) are made while the in-project episode before it runs,
inside that episode's timer and CPU (the warm-up episode makes the first). The task is loaded once,
outside both timers. The target is in-project within 1.3x of native.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import resource
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from clawgym_env.harness_registry import HARNESSES

SUITE = Path(__file__).resolve().parents[1] / "tests" / "harnesses" / "tasks" / "h6-smoke"
WRITE = {
    "claude-code": ("Write", "file_path", "{ws}/hello.txt"),
    "openclaw": ("write", "path", "hello.txt"),
    "custom": ("write", "path", "hello.txt"),
    "gemini-cli": ("write_file", "file_path", "{ws}/hello.txt"),
    "qwen-code": ("write_file", "file_path", "{ws}/hello.txt"),
    "opencode": ("write", "filePath", "{ws}/hello.txt"),
    "pi": ("write", "path", "hello.txt"),
}
"""Harness -> (its write tool, the path argument, the path): the names and arguments each harness offers the model."""
SHELL_WRITE = {"claude-code-bash": ("Bash", "command"), "codex": ("exec_command", "cmd"), "mini-swe-agent": ("bash", "command")}
"""Harnesses offering only a shell (or, for Codex, no write tool): (shell tool, its command argument)."""
SUBMIT = {"mini-swe-agent": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}
"""Harnesses that end only on a shell command, not on a plain-text turn: their final turn runs it."""


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


class TreeCPU:
    """CPU seconds of every process under this one but itself, through a cpuacct (cgroup v1) group
    this process moves into for the run; ``None`` readings where no such group can be made."""

    def __init__(self) -> None:
        self.dir: Path | None = None
        root = Path("/sys/fs/cgroup/cpuacct")
        if not (root / "cpuacct.usage").exists():
            return
        try:
            own = next(
                ln.split(":", 2)[2]
                for ln in Path("/proc/self/cgroup").read_text().splitlines()
                if "cpuacct" in ln.split(":", 2)[1].split(",")
            )
            self.parent = root / own.lstrip("/")
            self.dir = self.parent / f"clawgym-bench-{os.getpid()}"
            self.dir.mkdir()
            (self.dir / "cgroup.procs").write_text(str(os.getpid()))
        except (OSError, StopIteration):
            self.close()

    def now(self) -> float | None:
        if self.dir is None:
            return None
        return int((self.dir / "cpuacct.usage").read_text()) / 1e9 - time.process_time()

    def close(self) -> None:
        if self.dir is not None:
            try:
                (self.parent / "cgroup.procs").write_text(str(os.getpid()))
                self.dir.rmdir()
            except OSError:
                pass
            self.dir = None


CPU = TreeCPU()


def _children_cpu() -> float:
    """CPU seconds of every reaped child process so far (user + system). Native runs only: a sandbox's
    processes do not report theirs here (whole sandboxed Claude Code episodes read ~0.1 s)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def backend(harness: str, workspace: str = "/workspace") -> Any:
    from clawgym_env.proxy import ScriptedBackend

    if harness in SHELL_WRITE:  # a harness offering only a shell writes the file with it
        tool, arg = SHELL_WRITE[harness]
        args = {arg: f"printf 'hello world\\n' > {workspace}/hello.txt"}
    elif harness in WRITE:
        tool, arg, path = WRITE[harness]
        args = {arg: path.format(ws=workspace), "content": "hello world\n"}
    else:
        raise SystemExit(
            f"bench/harness.py: no scripted write for harness {harness!r}; add its write tool to WRITE (or its shell to SHELL_WRITE)"
        )
    final: Any = "Done."
    if harness in SUBMIT:
        final = {"text": "Done.", "tool_calls": [{"name": tool, "arguments": {arg: SUBMIT[harness]}}]}
    return ScriptedBackend([{"tool_calls": [{"name": tool, "arguments": args}]}, final], default="Done.")


@functools.cache
def _spec() -> Any:
    """The task, loaded once (its YAML read and validated outside both sides' timers)."""
    from clawgym_env.task import load_suite

    return load_suite(SUITE).get("hello-file")


def grade_natively(spec: Any, workspace: Path, transcript: dict[str, Any]) -> float:
    """The task's code verifiers called in this process over the native workspace: what grading costs with no
    sandbox and no grading process (the in-project side runs the same ``grade()`` sealed, in its own process)."""
    from clawgym_env.task.spec import CodeVerifier

    total = weights = 0.0
    for v in spec.verifiers:
        if not isinstance(v, CodeVerifier):
            raise ValueError(f"native grading: {v.kind} verifiers are not supported here")
        path = spec.host_path(v.file)
        module: dict[str, Any] = {"__file__": str(path), "__name__": "clawgym_native_grade"}
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module)
        scores = module["grade"](transcript, str(workspace))
        total += v.weight * sum(float(x) for x in scores.values()) / len(scores)
        weights += v.weight
    return total / weights


async def one(harness: str, proxy: Any) -> Any:
    from clawgym_env.episode import run_episode

    # the task allows 180 s; a loaded machine makes OpenClaw slower than that, and native runs get 600 s too
    return await run_episode(_spec(), harness, backend(harness), proxy=proxy, wall_time_s=600)


def native_invocation(adapter: Any, hs: Any, egress_key: str, proxy_port: int, compile_cache: Path) -> tuple[list[str], dict[str, str]]:
    """The adapter's command and environment for a run on the host: every ``/opt/clawgym/...`` mount point in them
    mapped to the host folder bound there, plus the same egress variables ``run_episode`` adds (HTTP(S)_PROXY to
    the proxy, ``NODE_USE_ENV_PROXY``), so a harness phoning home meets the same 403 on both sides."""
    from clawgym_env.harness_install import cache_root
    from clawgym_env.proxy.egress import egress_env
    from harnesses._compile_cache import CACHE_INSIDE

    mounts = {str(m.inside): str(m.host) for m in adapter.mounts(cache_root())}
    if CACHE_INSIDE in mounts:
        mounts[CACHE_INSIDE] = str(compile_cache)
    inside = sorted(mounts.items(), key=lambda p: -len(p[0]))

    def host(value: str) -> str:
        for a, b in inside:
            value = value.replace(a, b)
        return value

    cmd = [host(a) for a in adapter.build_command(_spec().instruction, hs)]
    env = {k: host(v) for k, v in {**adapter.build_env(hs), **egress_env(egress_key, proxy_port)}.items()}
    env["PATH"] = env.get("PATH", "") + ":" + os.environ.get("PATH", "")
    return cmd, env


async def native(harness: str, proxy: Any, compile_cache: Path) -> tuple[float, int, bool, float]:
    """The adapter's command run on the host (no sandbox), then its proxy session closed and the episode graded
    in this process (``grade_natively``), as ``run_episode`` closes and grades in-project: wall seconds, peak RSS
    bytes, scored 1.0, CPU seconds.

    ``compile_cache`` stands in for OpenClaw's read-only warm cache: natively Node could write to it, and its
    entries are keyed by the host paths, so the native runs warm a private one (the warm-up run) instead.
    """
    import tempfile

    from clawgym_env.episode import transcript_for_verifier
    from clawgym_env.harness import HarnessSession
    from clawgym_env.harness_registry import load_harness

    adapter = load_harness(harness)
    with tempfile.TemporaryDirectory(prefix="clawgym-native-") as d:
        ws, home = Path(d) / "workspace", Path(d) / "home"
        ws.mkdir()
        home.mkdir()
        sess = proxy.open_session(backend(harness, str(ws)), max_calls=8)
        hs = HarnessSession(
            session_id=sess.session_id, base_url=proxy.url, api_key=sess.api_key, model="policy", workspace=str(ws), home=str(home)
        )
        cmd, env = native_invocation(adapter, hs, sess.egress_key, proxy.port, compile_cache)
        for path, content in adapter.write_configs(hs).items():
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(content)
        cpu0 = _children_cpu()
        err = (Path(d) / "stderr.log").open("wb")
        with PeakRSS() as mem, err:
            t0 = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                env=env,
                cwd=ws,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
            try:
                await asyncio.wait_for(proc.wait(), 600)
            finally:  # interrupted or timed out: leave no harness running on the host
                if proc.returncode is None:
                    os.killpg(proc.pid, 9)  # its own session: the harness's children go too
                    await proc.wait()
            calls = await proxy.close_session(sess.session_id)
            score = grade_natively(_spec(), ws, transcript_for_verifier(_spec(), calls))
            wall = time.perf_counter() - t0
        if score != 1.0 or sess.egress:  # say why, rather than print a figure of a run that did not do the task
            tail = (Path(d) / "stderr.log").read_bytes()[-600:].decode("utf-8", "replace")
            print(
                f"{harness}: native run scored {score}, exit {proc.returncode}, {len(calls)} calls, egress attempts "
                f"{[r.path for r in sess.egress]}; stderr tail: {tail!r}"
            )
        return wall, mem.peak, score == 1.0, _children_cpu() - cpu0


async def side_by_side(harness: str, repeats: int) -> tuple[float, float, int, int]:
    """Native and in-project runs of the same episode, alternating, medians side by side."""
    import tempfile

    from clawgym_env.proxy import ProxyServer

    nat: list[tuple[float, int, bool, float]] = []
    proj: list[tuple[float, float, int, bool]] = []
    proj_cpu: list[float] = []
    phases: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as d:
        async with ProxyServer(uds_path=Path(d) / "proxy.sock") as proxy:
            private = Path(d) / "compile-cache"
            await native(harness, proxy, private)  # warm-up: page cache, compile cache
            t0 = time.perf_counter()
            first = await one(harness, proxy)  # warm-up: this process's one-time bwrap probe and /etc
            first_wall = time.perf_counter() - t0
            for _ in range(repeats):
                nat.append(await native(harness, proxy, private))
                c0 = CPU.now()
                with PeakRSS() as mem:
                    t0 = time.perf_counter()
                    r = await one(harness, proxy)
                    wall = time.perf_counter() - t0
                c1 = CPU.now()
                if c0 is not None and c1 is not None:
                    proj_cpu.append(c1 - c0)
                proj.append((wall, r.timings.get("harness", 0.0), mem.peak, r.status == "completed" and r.score == 1.0))
                phases.append(r.timings)
    n_wall = statistics.median(w for w, *_ in nat)
    n_mem = statistics.median(m for _, m, *_ in nat)
    n_cpu = statistics.median(c for *_, c in nat)
    p_wall = statistics.median(w for w, _, _, _ in proj)
    p_harn = statistics.median(h for _, h, _, _ in proj)
    p_mem = statistics.median(m for _, _, m, _ in proj)
    print(
        f"{harness:12} native     {sum(ok for _, _, ok, _ in nat)}/{repeats} ok: wall median {n_wall:6.3f} s "
        f"(min {min(w for w, *_ in nat):.3f}, max {max(w for w, *_ in nat):.3f}), peak RSS {n_mem / 2**20:5.0f} MiB, "
        f"CPU {n_cpu:.2f} s"
    )
    print(
        f"{harness:12} in-project {sum(ok for *_, ok in proj)}/{repeats} ok: wall median {p_wall:6.3f} s "
        f"(min {min(w for w, *_ in proj):.3f}, max {max(w for w, *_ in proj):.3f}), harness phase {p_harn:.3f} s, "
        f"peak RSS {p_mem / 2**20:5.0f} MiB, CPU {f'{statistics.median(proj_cpu):.2f} s' if proj_cpu else 'n/a'}"
    )
    split = ", ".join(
        f"{k} {statistics.median(t.get(k, 0.0) for t in phases):.3f}" for k in ("sandbox", "harness", "verifier", "collect", "cleanup")
    )
    print(f"{harness:12} in-project phases (median s): {split}")
    print(
        f"{harness:12} first in-project episode of this process (warm-up, not in the medians): {first_wall:.2f} s, "
        f"sandbox phase {first.timings.get('sandbox', 0.0):.2f} s (the one-time bwrap probe and shared /etc)"
    )
    cpu_ratio = f", CPU {statistics.median(proj_cpu) / n_cpu:.2f}x" if proj_cpu and n_cpu > 0 else ""
    print(
        f"{harness:12} in-project / native: episode {p_wall / n_wall:.2f}x, harness phase {p_harn / n_wall:.2f}x, "
        f"peak RSS {p_mem / max(n_mem, 1):.2f}x{cpu_ratio}"
    )
    return n_wall, p_wall, int(n_mem), int(p_mem)


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
            print(
                f"{harness:12} sequential: {ok}/{repeats} ok, wall median {statistics.median(walls):.2f} s "
                f"(min {min(walls):.2f}, max {max(walls):.2f}), peak RSS median {statistics.median(peaks) / 2**20:.0f} MiB"
            )
            avail = psutil.virtual_memory().available
            print(f"{harness:12} memory bound: ~{int(avail / max(peaks))} concurrent episodes in {avail / 2**30:.1f} GiB available")
            for k in levels:
                with PeakRSS() as mem:
                    t0 = time.perf_counter()
                    results = await asyncio.gather(*(one(harness, proxy) for _ in range(k)))
                    wall = time.perf_counter() - t0
                good = sum(r.status == "completed" and r.score == 1.0 for r in results)
                print(
                    f"{harness:12} concurrency {k:3}: {good}/{k} ok in {wall:.1f} s ({k / wall:.2f} episodes/s), "
                    f"peak RSS {mem.peak / 2**20:.0f} MiB"
                )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harness", default=",".join(HARNESSES), help="comma-separated (default: every registered harness)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--concurrency", default="", help="also run in-project episodes at these concurrency levels")
    a = p.parse_args()
    print(f"machine: {psutil.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM")
    print(
        "compared: native = the harness process on the host (the adapter's command and flags, no sandbox), its "
        "proxy session closed and the task's grade() called in this process; in-project = run_episode (sandbox "
        "start + harness in bwrap + sealed grading, started while the harness runs + cleanup). Both are warmed up "
        "once first; medians are of the runs after. Target: in-project episode wall within 1.3x of native."
    )
    rows = []
    for h in a.harness.split(","):
        load0 = os.getloadavg()[0]
        rows.append((h, load0, *asyncio.run(side_by_side(h, a.repeats)), os.getloadavg()[0]))
        if a.concurrency:
            asyncio.run(bench(h, a.repeats, [int(x) for x in a.concurrency.split(",")]))
    print(f"\n{'harness':16} {'native s':>9} {'in-project s':>12} {'ratio':>6} {'native MiB':>10} {'in-project MiB':>14}  load")
    for h, l0, n_wall, p_wall, n_mem, p_mem, l1 in rows:
        print(f"{h:16} {n_wall:9.3f} {p_wall:12.3f} {p_wall / n_wall:5.2f}x {n_mem / 2**20:10.0f} {p_mem / 2**20:14.0f}  {l0:.1f}-{l1:.1f}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    CPU.close()


if __name__ == "__main__":
    main()
