"""Per-sandbox cgroups: limits written, processes joined before they fork, nothing left after."""

from __future__ import annotations

import subprocess

import pytest

from clawgym_env.sandbox._cgroup import SandboxCgroup, detect


@pytest.fixture
def info():
    found = detect()
    if found is None:  # the doctor must then say limits are not enforced (checked in test_security)
        pytest.skip("no writable cgroup on this machine; `clawgym sandbox doctor` reports it")
    return found


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
        r = subprocess.run(cg.wrap_argv(["cat", "/proc/self/cgroup"]), capture_output=True, text=True, check=True)
        name = next(iter(cg.dirs.values())).name
        assert name in r.stdout
        assert cg.limit_hit() is None
    finally:
        cg.destroy()
    assert not any(d.exists() for d in cg.dirs.values())


def test_pids_limit_is_reported(info) -> None:
    if "pids" not in info.parents:
        pytest.skip("pids controller not writable here")
    cg = SandboxCgroup(info, memory_mb=None, pids=5, cpus=None)
    try:
        script = "for i in 1 2 3 4 5 6 7 8; do sleep 2 & done; wait"
        subprocess.run(cg.wrap_argv(["sh", "-c", script]), capture_output=True, timeout=30)
        assert cg.limit_hit() == "pids"
        assert cg.limit_hit() is None  # counted once
    finally:
        cg.destroy()
