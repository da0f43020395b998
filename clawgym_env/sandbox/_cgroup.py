"""Per-sandbox resource limits through cgroups (v1 or v2), where this process may write them.

A sandbox gets one child cgroup (per controller on v1) under the cgroup this process lives in.
The backend moves each exec's first process in (``join``) *before* it forks anything (bwrap: its
namespace init, held before the command, see ``_bwrap_hold``), or starts it from a process already
inside (``_bwrap_spare``: a cgroup made ahead, ``unlimited``, then ``limit``); everything it starts
inherits the limits. After a process exits, ``limit_hit`` says whether the memory (OOM kill) or pids limit fired.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from clawgym_env.sandbox._sweep import owner_tag, sweep_cgroups

__all__ = ["CgroupInfo", "SandboxCgroup", "controllers_for", "detect", "limit_counters", "limit_fired"]

_ROOT = Path("/sys/fs/cgroup")
_V1_CONTROLLERS = ("memory", "pids", "cpu")


@dataclass(frozen=True)
class CgroupInfo:
    """Where limits can be written: ``version`` 1 or 2, the parent folder per controller."""

    version: int
    parents: dict[str, Path]
    """controller -> folder under which a sandbox cgroup is created (v2: one folder for all)."""


def _own_paths() -> dict[str, str]:
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        for c in ctrls.split(",") if ctrls else [""]:
            paths[c] = path
    return paths


def _writable_dir(p: Path) -> bool:
    probe = p / f"clawgym-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        probe.rmdir()
    except OSError:
        pass
    return True


def _enable_controllers(parent: Path, wanted: set[str], at_ns_root: bool) -> bool:
    """Enable ``wanted`` for children of ``parent``.

    cgroup v2 refuses this (EBUSY) while ``parent`` itself holds processes. At the root of a
    cgroup namespace (inside a container, as root) we then do what docker-in-docker does: move
    the container's processes into a ``clawgym-host`` leaf and retry. Opt out with
    CLAWGYM_CGROUP_TAKEOVER=0. Never attempted elsewhere (e.g. on a shared host's own cgroup).
    """
    ctl = parent / "cgroup.subtree_control"
    try:
        missing = wanted - set(ctl.read_text().split())
        if missing:
            ctl.write_text(" ".join(f"+{c}" for c in sorted(missing)))
        return True
    except OSError as exc:
        takeover = os.environ.get("CLAWGYM_CGROUP_TAKEOVER", "1") != "0"
        if exc.errno != errno.EBUSY or not at_ns_root or os.geteuid() != 0 or not takeover:
            return False
    try:
        leaf = parent / "clawgym-host"
        leaf.mkdir(exist_ok=True)
        for pid in (parent / "cgroup.procs").read_text().split():
            try:
                (leaf / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # kernel threads and exited processes cannot move
        ctl.write_text(" ".join(f"+{c}" for c in sorted(wanted)))
        return True
    except OSError:
        return False


def _detect_v2(own: dict[str, str]) -> CgroupInfo | None:
    base = _ROOT if (_ROOT / "cgroup.controllers").exists() else _ROOT / "unified"
    if "" not in own or not (base / "cgroup.controllers").exists():
        return None
    parent = base / own[""].lstrip("/")
    try:
        available = set((parent / "cgroup.controllers").read_text().split())
    except OSError:
        return None
    wanted = available & {"memory", "pids", "cpu"}
    if not wanted:
        return None
    if not _enable_controllers(parent, wanted, at_ns_root=own[""] == "/"):
        return None
    if not _writable_dir(parent):
        return None
    return CgroupInfo(2, {c: parent for c in wanted})


def _detect_v1(own: dict[str, str]) -> CgroupInfo | None:
    parents: dict[str, Path] = {}
    for c in _V1_CONTROLLERS:
        mount = _ROOT / c
        if c not in own or not (mount / "cgroup.procs").exists():
            continue
        parent = mount / own[c].lstrip("/")
        if _writable_dir(parent):
            parents[c] = parent
    return CgroupInfo(1, parents) if parents else None


_cached: list[CgroupInfo | None] = []


def detect() -> CgroupInfo | None:
    """The cgroup setup this process can use for limits, or None (cached after the first call)."""
    if not _cached:
        own = _own_paths()
        _cached.append(_detect_v2(own) or _detect_v1(own))
    return _cached[0]


class SandboxCgroup:
    """One sandbox's cgroup(s): created with limits, joined by ``join``, removed by ``destroy``."""

    def __init__(self, info: CgroupInfo, memory_mb: int | None, pids: int | None, cpus: float | None) -> None:
        self._make(info, controllers_for(info, memory_mb, pids, cpus))
        self.limit(memory_mb, pids, cpus)

    @classmethod
    def unlimited(cls, info: CgroupInfo, controllers: frozenset[str]) -> SandboxCgroup:
        """The cgroup(s) of ``controllers``, no limit written yet (``limit``): one made ahead (``_bwrap_spare``)."""
        cg = cls.__new__(cls)
        cg._make(info, controllers)
        return cg

    def _make(self, info: CgroupInfo, controllers: frozenset[str]) -> None:
        self.info = info
        _sweep_once(tuple(sorted(set(info.parents.values()))))
        name = f"clawgym-{owner_tag()}-{uuid.uuid4().hex[:8]}"
        self.dirs: dict[str, Path] = {}
        self._baseline: dict[str, int] = {}
        for c, parent in info.parents.items():
            if c not in controllers:
                continue
            d = parent / name
            if d not in self.dirs.values():
                d.mkdir()
            self.dirs[c] = d

    def limit(self, memory_mb: int | None, pids: int | None, cpus: float | None) -> None:
        """Write the limits (controllers not made are skipped) and count limit hits from now on."""
        self._write_limits(memory_mb, pids, cpus)
        self._baseline = self._counters()

    def _write_limits(self, memory_mb: int | None, pids: int | None, cpus: float | None) -> None:
        v2 = self.info.version == 2
        if memory_mb is not None and "memory" in self.dirs:
            d, n = self.dirs["memory"], str(memory_mb * 1024 * 1024)
            if v2:
                (d / "memory.max").write_text(n)
                _try_write(d / "memory.swap.max", "0")
            else:
                (d / "memory.limit_in_bytes").write_text(n)
                _try_write(d / "memory.memsw.limit_in_bytes", n)
        if pids is not None and "pids" in self.dirs:
            self.dirs["pids"].joinpath("pids.max").write_text(str(pids))
        if cpus is not None and "cpu" in self.dirs:
            period = 100_000
            quota = max(1000, int(cpus * period))
            if v2:
                (self.dirs["cpu"] / "cpu.max").write_text(f"{quota} {period}")
            else:
                (self.dirs["cpu"] / "cpu.cfs_period_us").write_text(str(period))
                (self.dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))

    def join(self, pid: int, pid_ns: int | None = None) -> None:
        """Move process ``pid`` into the cgroup(s) (blocking: cgroup v1 waits for an RCU grace period). The caller
        makes sure it has not forked yet. ``pid_ns``: the inode of the pid namespace ``pid`` must be in, checked
        first, so a pid that died and was reused by some other process is never moved in (nor later killed with
        the sandbox). ProcessLookupError when the process is gone; other OSErrors when the cgroup refuses it."""
        try:
            ns = os.readlink(f"/proc/{pid}/ns/pid") if pid_ns is not None else None
        except FileNotFoundError:
            raise ProcessLookupError(f"process {pid} is gone") from None
        if pid_ns is not None and ns != f"pid:[{pid_ns}]":
            raise ProcessLookupError(f"process {pid} is no longer the sandbox's namespace init")
        for procs in sorted({d / "cgroup.procs" for d in self.dirs.values()}):
            procs.write_text(str(pid))

    def _counters(self) -> dict[str, int]:
        return limit_counters(self.dirs, "memory.events" if self.info.version == 2 else "memory.oom_control")

    def limit_hit(self) -> str | None:
        """ "memory" or "pids" if that limit fired since the last call, else None."""
        now = self._counters()
        hit = limit_fired(self._baseline, now)
        self._baseline = now
        return hit

    def pids_inside(self) -> list[int]:
        pids: set[int] = set()
        for d in self.dirs.values():
            try:
                pids.update(int(p) for p in (d / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return sorted(pids)

    def kill_all(self) -> bool:
        """SIGKILL everything inside until nothing is left (a process leaves ``cgroup.procs`` only once it
        has exited, files closed); polls finely for up to ~2 s (``_backoff``). True when the cgroup is empty."""
        for wait in _backoff():
            pids = self.pids_inside()
            if not pids:
                return True
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            _sleep(wait)
        return not self.pids_inside()

    def remove_now(self) -> bool:
        """``destroy`` without waiting: True when nothing was inside and every folder is gone (else call ``destroy``)."""
        if self.pids_inside():
            return False
        for d in set(self.dirs.values()):
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:  # a process still leaving
                return False
        return True

    def destroy(self) -> None:
        """Kill anything still inside, then remove the cgroup folders."""
        # Dying processes linger a few ms (and keep rmdir busy)
        self.kill_all()
        for d in set(self.dirs.values()):
            for wait in _backoff():
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    _sleep(wait)


def controllers_for(info: CgroupInfo, memory_mb: int | None, pids: int | None, cpus: float | None) -> frozenset[str]:
    """The controllers a sandbox with these limits gets a cgroup in: only those limited (on v1 each hierarchy
    costs a migration per exec)."""
    wanted = {"memory": memory_mb, "pids": pids, "cpu": cpus}
    return frozenset(c for c in info.parents if wanted.get(c) is not None)


@functools.cache
def _sweep_once(parents: tuple[Path, ...]) -> int:
    """Once per process: remove cgroups left by processes that died without closing."""
    return sweep_cgroups(list(parents))


def _backoff() -> Iterator[float]:
    """The waits between polls for processes still leaving, ~2 s in all: 0.25 ms at first, doubling to 2 ms.
    Measured, a sandbox's namespace init was still inside in ~half of the episodes once bwrap had reported
    its command's exit (it tears the namespaces down after), gone within ~1 ms: a flat 2 ms poll cost 2.3 ms."""
    wait, total = 0.00025, 0.0
    while total < 2.0:
        yield wait
        total += wait
        wait = min(wait * 2, 0.002)


def _sleep(s: float) -> None:
    import time

    time.sleep(s)


def _try_write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError:
        pass


def limit_counters(dirs: Mapping[str, Path], memory_file: str) -> dict[str, int]:
    """OOM kills (``memory_file`` in ``dirs["memory"]``) and pids-limit hits (``dirs["pids"]``), where present."""
    out: dict[str, int] = {}
    if "memory" in dirs:
        out["memory"] = _read_key(dirs["memory"] / memory_file, "oom_kill")
    if "pids" in dirs:
        out["pids"] = _read_key(dirs["pids"] / "pids.events", "max")
    return out


def limit_fired(before: Mapping[str, int], now: Mapping[str, int]) -> str | None:
    """ "memory" or "pids" if that counter grew from ``before`` to ``now`` (memory first), else None."""
    return next((k for k in ("memory", "pids") if now.get(k, 0) > before.get(k, 0)), None)


def _read_key(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        pass
    return 0
