"""A run killed from outside (SIGKILL: nothing of it gets to clean up) leaves nothing on the host once
the next run has started: no sandbox folder, no tmpfs mount, no cgroup, no container, no temp folder
(proxy socket, final workspace), no process.

Each run is ``clawgym bench run`` in a process of its own, real custom harness, real sandboxes. The
first is killed while its episode's command sleeps; what it owns is listed by its owner tag (the
``<pid>.<start time>`` its sandboxes and temp folders carry) and must be there, or the test proves
nothing. While it is alive, ``sandbox doctor --clean`` must leave all of it; once it is killed, a
second, short run starts, and nothing tagged with the dead run may be left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import get_args

import yaml

from clawgym_env.sandbox._sweep import TempKind
from clawgym_env.sandbox._tmpfs import mounts_under
from clawgym_env.sandbox.bwrap import sandbox_root
from clawgym_env.sandbox.doctor import clean
from tests.clawgym_env.sandbox.conftest import backend, processes_with  # noqa: F401  (bwrap; docker under its marker)
from tests.security.conftest import ORIGINAL, REPO, bash

MARKER = "sleep 41.25"


def _bench(policy: Path, out: Path, sandbox: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "clawgym_env.cli.main", "bench", "run", "--model", f"scripted:{policy}",
         "--harness", "custom", "--suite", str(ORIGINAL), "--tasks", "smoke-hello-file-p0", "--sandbox", sandbox,
         "--out", str(out), "--no-progress", *extra],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def _tag(pid: int) -> str:
    return f"{pid}.{Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[19]}"


def _folders_of(tag: str) -> list[str]:
    """The folders (sandboxes', temp) of the process tagged ``tag``, and the mounts on them."""
    found: list[str] = []
    temp = [(Path(tempfile.gettempdir()), f"clawgym-{kind}-") for kind in ("docker", *get_args(TempKind))]
    for root, prefix in [(Path(sandbox_root()), "clawgym-bwrap-"), *temp]:
        for d in root.glob(f"{prefix}{tag}-*"):
            found += [f"mount {m}" for m in mounts_under(d)] + [f"folder {d}"]
    return found


def _left_by(tag: str) -> list[str]:
    """Everything on the host that the process tagged ``tag`` made for its sandboxes and proxy (once it is
    dead: a live run adds and removes cgroups as it goes)."""
    found = _folders_of(tag)
    for parent, subdirs, _ in os.walk("/sys/fs/cgroup"):  # skips cgroups gone meanwhile (other processes')
        found += [f"cgroup {parent}/{d}" for d in subdirs if d.startswith(f"clawgym-{tag}-")]
    try:
        import docker

        client = docker.from_env(timeout=5)
        found += [f"container {c.name}" for c in client.containers.list(all=True, filters={"label": f"clawgym.owner={tag}"})]
    except Exception:  # no dockerd: no containers
        pass
    return found


def test_a_run_killed_mid_episode_is_cleaned_up_by_the_next(backend: str, tmp_path: Path) -> None:
    slow = tmp_path / "slow.yaml"
    slow.write_text(yaml.safe_dump({"replies": [bash(MARKER)], "default": "done"}))
    quick = tmp_path / "quick.yaml"
    quick.write_text(yaml.safe_dump({"replies": [], "default": "done"}))
    run = _bench(slow, tmp_path / "killed", backend, "--save-workspaces")
    try:
        tag = _tag(run.pid)
        deadline = time.monotonic() + 180
        while not processes_with(MARKER):
            assert run.poll() is None, f"the run ended before its episode slept: {run.stderr.read().decode()[-2000:]}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the episode's command never started"
            time.sleep(0.1)
        alive = _folders_of(tag)
        clean()  # what `clawgym sandbox doctor --clean` does: a live run's folders, mounts and sockets stay
        assert set(alive) <= set(_folders_of(tag)) and run.poll() is None, f"cleaned from a live run: {alive}"
        assert any("/clawgym-run-" in x for x in alive) and processes_with(MARKER), alive
        os.kill(run.pid, signal.SIGKILL)
        run.wait(30)
    finally:
        if run.poll() is None:
            run.kill()
    left = _left_by(tag)
    assert any(x.startswith("folder") for x in left), f"the killed run left nothing to clean: {left}"
    for kind in ("run", "final"):  # its proxy socket's folder, the final workspace being saved
        assert any(f"/clawgym-{kind}-{tag}-" in x for x in left), left
    if backend == "docker":
        assert any(x.startswith("container") for x in left) and any(x.startswith("mount") for x in left), left
    nxt = _bench(quick, tmp_path / "next", backend)
    _, err = nxt.communicate(timeout=300)
    assert nxt.returncode == 0, err.decode()[-2000:]
    assert _left_by(tag) == []
    for _ in range(50):  # the killed sandbox's processes die with it (bwrap) or with its container (docker)
        if not processes_with(MARKER):
            break
        time.sleep(0.1)
    assert processes_with(MARKER) == []
