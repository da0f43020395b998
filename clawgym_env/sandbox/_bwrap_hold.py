"""A bwrap exec held before its command until the host has done what must come first.

bwrap writes its namespace init's pid to ``--info-fd`` right after its clone(), and reads ``--block-fd``
at the very end of its setup (bubblewrap.c 0.11: after the mounts and pivot_root, before the seccomp
filter, the fork of the command and its exec). While it waits there the sandbox holds one process of
its own, that init, and nothing of the command has run. In that window the host, in threads, while
bwrap still sets up its mounts:

* moves the init into the sandbox's cgroup (``SandboxCgroup.join``), so everything the command starts
  is born inside. This replaced a shell that moved itself in before it exec'd bwrap: one process start
  less, and the cgroup move (cgroup v1 here: a wait for an RCU grace period, ~5 ms) now overlaps
  bwrap's own setup instead of coming before it;
* makes the proxy's listener inside the sandbox's network namespace and serves it (``_bridge``).

An exec started by a spare launcher (``_bwrap_spare``) is in the cgroup already: it is held for the
listener only, and so that nothing reaches the launcher's stdin before bwrap runs.

Then one byte on the block pipe lets the command start. Anything failing first kills the exec unstarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym_env.errors import SandboxExecError
from clawgym_env.sandbox import _bridge

if TYPE_CHECKING:
    from clawgym_env.sandbox._cgroup import SandboxCgroup
    from clawgym_env.sandbox._process import Running

__all__ = ["HeldExec", "parse_info", "start_held"]


def parse_info(info: bytes) -> tuple[int, int | None]:
    """(the namespace init's pid, the inode of its pid namespace or None) from what bwrap wrote to ``--info-fd``."""
    data = json.loads(info)
    ns = data.get("pid-namespace")
    return int(data["child-pid"]), int(ns) if ns is not None else None


async def _read_to_eof(fd: int) -> bytes:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes] = loop.create_future()
    parts: list[bytes] = []
    os.set_blocking(fd, False)

    def readable() -> None:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError as exc:
            chunk, parts[:] = b"", [str(exc).encode()]
        if chunk:
            parts.append(chunk)
            return
        loop.remove_reader(fd)
        if not done.done():
            done.set_result(b"".join(parts))

    loop.add_reader(fd, readable)
    try:
        return await done
    finally:
        loop.remove_reader(fd)


async def start_held(start: Awaitable[Running]) -> Running:
    """``start`` (a ``start_process``) for a held exec. Cancelled meanwhile, asyncio would kill bwrap alone and
    wait for its pipes, which the held init (in bwrap's process group, without its death signal yet) keeps open:
    instead the start finishes, then the whole tree is killed."""
    starting = asyncio.ensure_future(start)
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await (await starting).discard()
        raise


class HeldExec:
    """One bwrap exec held at ``--block-fd``: bwrap gets ``bwrap_args`` (and ``child_fds`` passed), then ``open``
    joins ``cgroup`` and makes the listener for ``bridge`` ((port inside, the proxy's socket)), and lets the
    command start, if ``wanted()`` still says so then (the sandbox was not closed meanwhile); ``close`` when
    the exec is over."""

    def __init__(
        self,
        cgroup: SandboxCgroup | None,
        bridge: tuple[int, Path] | None,
        wanted: Callable[[], bool],
        pipes: tuple[int, int, int, int] | None = None,
    ) -> None:
        """``pipes``: (info read end, block write end, and the numbers the other ends have in bwrap) of a launcher
        started with them already (``_bwrap_spare``); else the pipes are made here, their bwrap ends ``child_fds``."""
        self._cgroup, self._bridge, self._wanted = cgroup, bridge, wanted
        if pipes is None:
            info_r, info_w = os.pipe()
            block_r, block_w = os.pipe()
            self._fds = {"info_r": info_r, "info_w": info_w, "block_r": block_r, "block_w": block_w}
            self._child = (info_w, block_r)
        else:
            self._fds = {"info_r": pipes[0], "block_w": pipes[1]}
            self._child = (pipes[2], pipes[3])
        self._relay: _bridge.Relay | None = None

    def bwrap_args(self) -> list[str]:
        return ["--info-fd", str(self._child[0]), "--block-fd", str(self._child[1])]

    def child_fds(self) -> tuple[int, ...]:
        """The descriptors bwrap must be given (none for a launcher that has them)."""
        return tuple(self._fds[k] for k in ("info_w", "block_r") if k in self._fds)

    async def open(self, running: Running) -> None:
        """Once bwrap runs: wait for its namespaces, do the host's part, then unblock the command. On any
        failure ``running`` is killed before the command could start, and this hold closed. A bwrap that
        ended meanwhile (an error of its own, or killed: the sandbox closed) is left for ``finish`` to report."""
        self._close_fds("info_w", "block_r")  # the child has its own copies
        try:
            await self._open(running)
        except BaseException as exc:
            await running.discard()
            self.close()
            if isinstance(exc, OSError):
                raise SandboxExecError(f"bwrap: could not prepare the sandbox for its command: {exc}") from exc
            raise

    async def _open(self, running: Running) -> None:
        info = await _read_to_eof(self._fds["info_r"])
        if not info:  # bwrap ended (or was killed) before it said where its init is: make sure none is left
            running.kill()
            return
        try:
            pid, pid_ns = parse_info(info)
        except (ValueError, KeyError, TypeError):
            raise OSError(f"bwrap wrote no valid namespace info ({info[:200]!r})") from None
        steps: list[Any] = []
        if self._cgroup is not None:
            steps.append(asyncio.to_thread(self._cgroup.join, pid, pid_ns))
        if self._bridge is not None:
            steps.append(self._listen(pid, *self._bridge))
        failed = [r for r in await asyncio.gather(*steps, return_exceptions=True) if isinstance(r, BaseException)]
        if not self._wanted():  # the sandbox closed meanwhile (maybe before it knew of this exec): never start it
            running.kill()
            return
        if failed and all(isinstance(e, ProcessLookupError) for e in failed):
            return  # the init died meanwhile: the block pipe stays shut until the exec ends
        if failed:
            raise next(e for e in failed if not isinstance(e, ProcessLookupError))
        try:
            os.write(self._fds["block_w"], b"1")
        except BrokenPipeError:  # the init died meanwhile
            return
        self._close_fds("block_w", "info_r")

    async def _listen(self, pid: int, port: int, uds_path: Path) -> None:
        try:
            listener = await _bridge.listen_inside(pid, port)
        except FileNotFoundError as exc:  # no /proc/<pid>/ns/net: the init is gone
            raise ProcessLookupError(f"the sandbox's init {pid} is gone") from exc
        try:
            self._relay = await _bridge.Relay.serve(listener, uds_path)
        except BaseException:
            listener.close()
            raise
        if self._fds.get("block_w", -1) < 0:  # closed meanwhile (the exec failed): serve nothing
            self._relay.close()
            self._relay = None

    def _close_fds(self, *names: str) -> None:
        for name in names:
            fd = self._fds.pop(name, -1)
            if fd >= 0:
                os.close(fd)

    def close(self) -> None:
        """Stop listening and close what is left (idempotent). Closing the block pipe unwritten also lets a
        waiting bwrap go on, so on failure kill its process first."""
        self._close_fds(*list(self._fds))
        if self._relay is not None:
            self._relay.close()
            self._relay = None
