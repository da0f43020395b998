"""What a flood of files costs to clean up after an episode, with and without the sandbox's own tmpfs.

    python bench/sandbox_files.py [--files 100000] [--repeats 2]

Per repeat, side by side: a bwrap sandbox whose command makes ``--files`` empty files in its workspace,
then ``close()`` (its tmpfs unmounted: what a sandbox does now, ``SandboxConfig.max_files``); and the
same files made in a plain folder under the sandbox root, removed with ``rmtree_hard`` (what closing a
sandbox did before it had a tmpfs of its own). Then an agent asking for 4x the default limit: how many
files it got and what closing its sandbox took. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
from pathlib import Path

from clawgym_env.sandbox import SandboxConfig, create_sandbox
from clawgym_env.sandbox._fs import rmtree_hard
from clawgym_env.sandbox.bwrap import sandbox_root

MAKE = "mkdir -p {d} && cd {d} && seq 1 {n} | xargs touch 2>/dev/null; ls | wc -l"


async def _sandbox_close(files: int, max_files: int) -> tuple[int, float]:
    """(files the command got to make, seconds ``close()`` took)."""
    sb = create_sandbox("bwrap", SandboxConfig(max_files=max_files))
    await sb.start()
    try:
        r = await sb.exec(["bash", "-c", MAKE.format(d="/workspace/many", n=files)], timeout=1800)
        made = int(r.stdout.split()[-1])
    finally:
        t0 = time.perf_counter()
        await sb.close()
    return made, time.perf_counter() - t0


def _rmtree(files: int) -> float:
    d = Path(tempfile.mkdtemp(prefix="clawgym-bench-files-", dir=sandbox_root()))
    subprocess.run(["bash", "-c", MAKE.format(d=d / "many", n=files)], check=True, capture_output=True)
    t0 = time.perf_counter()
    rmtree_hard(d)
    return time.perf_counter() - t0


async def main(args: argparse.Namespace) -> None:
    print(f"host load: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cpus; sandbox root {sandbox_root()}")
    for i in range(args.repeats):
        made, unmount_s = await _sandbox_close(args.files, args.files + 1000)
        rm_s = _rmtree(args.files)
        print(
            f"repeat {i + 1}: {made} files: sandbox close (tmpfs unmount) {unmount_s:6.2f} s   "
            f"rmtree_hard of a plain folder {rm_s:6.2f} s   ({rm_s / unmount_s:.1f}x)"
        )
    default = SandboxConfig().max_files or 0
    made, close_s = await _sandbox_close(4 * default, default)
    print(f"flood: asked for {4 * default} files under the default max_files={default}: got {made}, close {close_s:.2f} s")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=2)
    asyncio.run(main(p.parse_args()))
