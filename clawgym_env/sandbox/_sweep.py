"""Clean up after processes that died without closing their sandboxes (kill -9, OOM, crash).

Sandbox folders and cgroups are named with their owner's tag, ``<pid>.<start time>`` (docker
containers carry it as the ``clawgym.owner`` label); a tag whose process no longer exists (or whose
pid was reused: the start time differs) marks leftovers that are safe to remove: the tmpfs mounted
on a folder is unmounted first. Live owners are never touched.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path

from clawgym_env.sandbox._fs import rmtree_hard
from clawgym_env.sandbox._tmpfs import mounts_under, unmount

__all__ = ["dead_owner", "owner_tag", "sweep_cgroups", "sweep_folders"]

log = logging.getLogger("clawgym.sandbox")
_TAGGED = re.compile(r"^clawgym-(?:bwrap-|docker-)?(\d+)\.(\d+)-")


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22: starttime, in clock ticks since boot


@functools.cache
def owner_tag() -> str:
    """This process's tag, ``<pid>.<start time>``, to put in names of what it creates."""
    pid = os.getpid()
    return f"{pid}.{_start_time(pid) or 0}"


def dead_owner(tag: str) -> bool:
    """Whether ``tag`` (``<pid>.<start time>``) names a process that is gone (never this one)."""
    pid, _, start = tag.partition(".")
    return pid.isdigit() and int(pid) != os.getpid() and _start_time(int(pid)) != start


def _dead(name: str) -> bool:
    m = _TAGGED.match(name)
    return m is not None and dead_owner(f"{m.group(1)}.{m.group(2)}")


def sweep_folders(root: Path, prefix: str = "clawgym-bwrap-") -> int:
    """Remove ``<prefix><tag>-*`` folders under ``root`` whose owner is gone, and the mounts on and under
    them; return the count."""
    removed = 0
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    for e in entries:
        try:
            if e.name.startswith(prefix) and e.is_dir(follow_symlinks=False) and (
                e.stat(follow_symlinks=False).st_uid == os.getuid() and _dead(e.name)
            ):
                for point in mounts_under(Path(e.path)):
                    unmount(point)
                rmtree_hard(Path(e.path))
                removed += 1
        except OSError:
            pass
    if removed:
        log.info("removed %d sandbox folder(s) left by dead processes under %s", removed, root)
    return removed


def sweep_cgroups(parents: list[Path]) -> int:
    """rmdir ``clawgym-<tag>-*`` cgroups whose owner is gone (their processes died with it)."""
    removed = 0
    for parent in parents:
        try:
            entries = list(os.scandir(parent))
        except OSError:
            continue
        for e in entries:
            if e.name.startswith("clawgym-") and e.is_dir(follow_symlinks=False) and _dead(e.name):
                try:
                    os.rmdir(e.path)
                    removed += 1
                except OSError:
                    pass
    return removed
