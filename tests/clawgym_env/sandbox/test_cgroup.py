"""Per-sandbox cgroups: limits written, processes joined before they fork, nothing left after."""

from __future__ import annotations

import os
import subprocess

import pytest

from clawgym_env.sandbox._cgroup import SandboxCgroup, detect


@pytest.fixture
def info():
    found = detect()
    if found is None:  # the doctor must then say limits are not enforced (checked in test_security)
        pytest.skip("no writable cgroup on this machine; `clawgym sandbox doctor` reports it")
    return found


def _joined_then_run(cg: SandboxCgroup, script: str) -> str:
    """A shell moved in by ``join`` while it waits on its stdin, then let go: what it prints."""
    p = subprocess.Popen(
        ["sh", "-c", "read go; " + script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        cg.join(p.pid)
        out, _ = p.communicate("go\n", timeout=30)
    finally:
        p.kill()
        p.wait()
    return out


def test_limits_are_written_and_processes_join(info) -> None:
    cg = SandboxCgroup(info, memory_mb=96, pids=17, cpus=0.25)
    try:
        mem, pids, cpu = cg.dirs.get("memory"), cg.dirs.get("pids"), cg.dirs.get("cpu")
        if mem is not None:
            f = "memory.max" if info.version == 2 else "memory.limit_in_bytes"
            assert int((mem / f).read_text()) == 96 * 1024 * 1024
        if pids is not None:
            assert (pids / "pids.max").read_text().strip() == "17"
        if cpu is not None:
            got = (cpu / "cpu.max").read_text().split()[0] if info.version == 2 else (cpu / "cpu.cfs_quota_us").read_text()
            assert int(got) == 25_000
        out = _joined_then_run(cg, "cat /proc/self/cgroup")
        name = next(iter(cg.dirs.values())).name
        assert name in out
        assert all(name in line for line in out.splitlines() if line.split(":")[1] in cg.dirs), out  # v1: each one
        assert cg.limit_hit() is None
    finally:
        cg.destroy()
    assert not any(d.exists() for d in cg.dirs.values())


def test_pids_limit_is_reported(info) -> None:
    if "pids" not in info.parents:
        pytest.skip("pids controller not writable here")
    cg = SandboxCgroup(info, memory_mb=None, pids=5, cpus=None)
    try:
        _joined_then_run(cg, "for i in 1 2 3 4 5 6 7 8; do sleep 2 & done; wait")
        assert cg.limit_hit() == "pids"
        assert cg.limit_hit() is None  # counted once
    finally:
        cg.destroy()


def test_join_refuses_a_process_of_another_pid_namespace(info) -> None:
    """The pid to move must be in the pid namespace bwrap reported (a pid that died and was reused is not the
    sandbox's init): nothing is moved, so nothing of the host is limited, or killed with the sandbox."""
    cg = SandboxCgroup(info, memory_mb=96, pids=17, cpus=None)
    p = subprocess.Popen(["sleep", "30"])
    try:
        before = open(f"/proc/{p.pid}/cgroup").read()
        ours = int(os.readlink(f"/proc/{p.pid}/ns/pid").split("[")[1].rstrip("]"))
        with pytest.raises(OSError):
            cg.join(p.pid, pid_ns=ours + 1)
        assert open(f"/proc/{p.pid}/cgroup").read() == before
        assert p.pid not in cg.pids_inside()
    finally:
        p.kill()
        p.wait()
        cg.destroy()
