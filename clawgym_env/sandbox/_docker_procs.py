"""The processes of a docker sandbox: the shell wrapper of every exec (the last one out kills what is left),
the reaper, from the host through the container's cgroup where it is known, else from inside; and the sweep
of what sandboxes of a process that died without closing them (kill -9) left: containers, workspace tmpfs."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawgym_env.sandbox._sweep import dead_owner, sweep_folders

__all__ = ["KILL_OTHERS", "OWNER_LABEL", "REAPER", "WRAP", "host_reap", "inner_pid", "sweep_docker"]

OWNER_LABEL = "clawgym.owner"
"""Container label: the tag (``_sweep.owner_tag``) of the process whose sandbox it is."""
_SWEPT: list[bool] = []

_EACH_OTHER = 'for p in /proc/[0-9]*; do pid="${p#/proc/}"; case " $keep $$ " in *" $pid "*) continue;; esac; '
"""Opens a loop over the container's processes but its own ($keep) and this shell; the caller closes it."""
KILL_OTHERS = "for _ in 1 2 3; do " + _EACH_OTHER + 'kill -9 "$pid" 2>/dev/null; done; done'
REAPER = (
    'keep="$1"; ' + KILL_OTHERS + "; for _ in $(seq 300); do left=0; " + _EACH_OTHER + '[ -e "$p" ] && left=1; done; '
    '[ "$left" = 0 ] && exit 0; sleep 0.01; done; exit 1'
)
"""Kills every process in the container but its own (init, sleep, forwarder: pids in $1) and waits until
they are gone (exit 0), or says that some are left after ~3 s (exit 1)."""
WRAP = (
    ': clawgym-exec; keep="$1"; shift; "$@"; rc=$?; last=1; for p in /proc/[0-9]*; do '
    '[ "${p#/proc/}" = "$$" ] && continue; case "$(tr "\\0" " " < "$p/cmdline" 2>/dev/null)" in '
    '"sh -c : clawgym-exec;"*) last=0;; esac; done; [ "$last" = 1 ] && { ' + KILL_OTHERS + "; }; exit $rc"
)
"""Runs the command; then, if no other exec is still running (the last one out reaps), kills whatever
is left in the container's pid namespace but its own processes; keeps the command's exit code."""


def inner_pid(host_pid: int) -> str | None:
    """The pid a host process has in its innermost pid namespace (None once it is gone)."""
    try:
        for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return line.split()[-1]
    except OSError:
        return None
    return None


def host_reap(cgroup: Path, own: set[str], stopped: Callable[[], bool]) -> bool:
    """SIGKILL every process of the container's ``cgroup`` but its ``own`` (pids inside) from the host, so
    nothing has to run inside a memory cgroup the agent may have filled; True once they are gone (or the
    container has ``stopped``), False if some are left after ~3 s."""
    for _ in range(300):
        try:
            pids = [int(x) for x in (cgroup / "cgroup.procs").read_text().split()]
        except OSError:  # the cgroup is gone with the container
            return stopped()
        left = [pid for pid in pids if inner_pid(pid) not in own]
        if not left:
            return True
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    return False


def sweep_docker(client: Any, *, again: bool = False) -> int:
    """Once per process (every call with ``again``): remove the containers, and the workspace folders with
    their tmpfs, that sandboxes of processes now gone left behind; returns how many."""
    if _SWEPT and not again:
        return 0
    _SWEPT.append(True)
    removed = 0
    for c in client.containers.list(all=True, filters={"label": OWNER_LABEL}):
        if dead_owner(str(c.labels.get(OWNER_LABEL, ""))):
            with contextlib.suppress(Exception):  # gone meanwhile, or dockerd refused: the next sweep tries again
                c.remove(force=True)
                removed += 1
    return removed + sweep_folders(Path(tempfile.gettempdir()), "clawgym-docker-")
