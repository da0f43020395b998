"""Clean up after processes that died without closing their sandboxes (kill -9, OOM, crash).

Sandbox folders, cgroups and the host temp folders of a run (``tagged_tempdir``: its proxy socket,
final workspaces, files read for a judge) are named with their owner's tag, ``<pid>.<start time>``
(docker containers carry it as the ``clawgym.owner`` label); a tag whose process no longer exists
(or whose pid was reused: the start time differs) marks leftovers that are safe to remove: the tmpfs
mounted on a folder is unmounted first. Live owners are never touched.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Literal, get_args

from clawgym_env.sandbox._fs import rmtree_hard
from clawgym_env.sandbox._tmpfs import mounts_under, unmount

__all__ = ["TempKind", "dead_owner", "owner_tag", "sweep_cgroups", "sweep_folders", "sweep_temp", "tagged_tempdir"]

log = logging.getLogger("clawgym.sandbox")
_TAGGED = re.compile(r"^clawgym-(?:[a-z]+-)?(\d+)\.(\d+)-")
TempKind = Literal["run", "proxy", "final", "read", "deliverables", "env"]
"""What a host temp folder holds: a proxy's socket (``run``, ``proxy``, ``env``), a final workspace, a file
read for a judge, deliverables to extract."""


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


def sweep_folders(root: Path, prefix: str | tuple[str, ...] = "clawgym-bwrap-") -> int:
    """Remove ``<prefix><tag>-*`` folders under ``root`` whose owner is gone, and the mounts on and under
    them; return the count."""
    removed = 0
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    for e in entries:
        try:
            if (
                e.name.startswith(prefix)
                and e.is_dir(follow_symlinks=False)
                and (e.stat(follow_symlinks=False).st_uid == os.getuid() and _dead(e.name))
            ):
                for point in mounts_under(Path(e.path)):
                    unmount(point)
                rmtree_hard(Path(e.path))
                removed += 1
        except OSError:
            pass
    if removed:
        log.info("removed %d folder(s) left by dead processes under %s", removed, root)
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


def sweep_temp() -> int:
    """Remove the ``tagged_tempdir`` folders of processes now gone from the temp folder; return the count."""
    return sweep_folders(Path(tempfile.gettempdir()), tuple(f"clawgym-{kind}-" for kind in get_args(TempKind)))


@functools.cache
def _sweep_temp_once() -> int:
    return sweep_temp()


def tagged_tempdir(kind: TempKind) -> tempfile.TemporaryDirectory[str]:
    """A private (0700) temp folder ``clawgym-<kind>-<tag>-*``, removed when closed. Should this process be
    killed first, the first one of a later process (or ``clawgym sandbox doctor --clean``) removes it."""
    _sweep_temp_once()
    return tempfile.TemporaryDirectory(prefix=f"clawgym-{kind}-{owner_tag()}-")
