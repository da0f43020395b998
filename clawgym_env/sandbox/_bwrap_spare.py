"""Spare launchers: an exec's cgroup move made ahead, off the critical path of the exec that uses it.

On cgroup v1 moving a process into a cgroup waits for an RCU grace period: 5-11 ms measured on the dev box,
the longest step before a held exec's command could start, even overlapped with bwrap's own setup
(``_bwrap_hold``). A spare is a host ``/bin/sh`` started in a background thread that moves itself into a
fresh cgroup (``SandboxCgroup.unlimited``; it writes "0", itself, to each ``cgroup.procs``, so no pid can
have been reused meanwhile) and then waits on a pipe for its script. A bwrap sandbox takes one as it starts
(``take``) and writes its limits into that cgroup; its first exec sends the script (``Spare.launch``): the
exec's environment, then ``exec bwrap ...``, so bwrap and everything it starts are born inside, as from a
held exec moved in. A spare exists before any sandbox that may take it, holds nothing of one, and serves one
exec of one sandbox only (a sealed one's shell opens its seccomp filter for bwrap). ``replenish``,
called once an exec's command runs, makes replacements in a background thread: back-to-back episodes each
pay for the spares they take (a shell start, a cgroup's folders, its move) while they run.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import re
import select
import shlex
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from clawgym_env.errors import SandboxExecError
from clawgym_env.sandbox._cgroup import CgroupInfo, SandboxCgroup

__all__ = ["AdoptedProcess", "Spare", "drop_spares", "replenish", "take"]

log = logging.getLogger("clawgym.sandbox")

SPARES = 2
"""Spares kept ready per set of controllers: an episode starts two sandboxes (the agent's, its grading one)."""
_READY_S = 30.0
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The arguments: each controller's cgroup.procs. A failed move exits before anything is read: nothing runs outside
# the cgroup. "r" on stdout says it is in; then the script comes on stdin, read up to its exec line only, as nothing
# more is written there before bwrap runs (its --info-fd says so: the hold's; ``Spare.launch``).
_SPARE_SH = 'for p do echo 0 >"$p" || exit 125; done; printf r && . /dev/stdin'


class AdoptedProcess:
    """A ``subprocess.Popen`` child started ahead, outside any event loop, driven on the running loop from
    ``adopt`` on as ``asyncio.subprocess.Process`` drives its own: stream readers and a writer over its pipes,
    a pidfd for its exit (the ``_process.ChildProcess`` protocol)."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: asyncio.StreamWriter | None,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
        exited: asyncio.Future[int],
    ) -> None:
        self._popen, self.stdin, self.stdout, self.stderr, self._exited = popen, stdin, stdout, stderr, exited

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    @classmethod
    async def adopt(cls, popen: subprocess.Popen[bytes], pidfd: int, with_stdin: bool) -> AdoptedProcess:
        """Take ``popen`` (its three pipes) and ``pidfd`` (owned from now on) onto the running loop."""
        loop = asyncio.get_running_loop()
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        readers = []
        for pipe in (popen.stdout, popen.stderr):
            reader = asyncio.StreamReader(limit=2**16)
            await loop.connect_read_pipe(lambda r=reader: asyncio.StreamReaderProtocol(r), pipe)  # type: ignore[misc]  # the default binds this pipe's reader
            readers.append(reader)
        writer = None
        if with_stdin:
            transport, protocol = await loop.connect_write_pipe(lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), popen.stdin)
            writer = asyncio.StreamWriter(transport, protocol, None, loop)
        else:  # the script gives it /dev/null
            popen.stdin.close()
        exited: asyncio.Future[int] = loop.create_future()

        def on_exit() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            if not exited.done():
                exited.set_result(popen.wait())  # it has exited: reaped at once

        loop.add_reader(pidfd, on_exit)
        return cls(popen, writer, readers[0], readers[1], exited)


class Spare:
    """One spare: the shell (in ``cgroup``, waiting for its script on stdin) and our ends of the hold's pipes,
    which bwrap gets (``--info-fd``, ``--block-fd``; it closes both before the command runs)."""

    def __init__(self, info: CgroupInfo, controllers: frozenset[str]) -> None:
        self.cgroup = SandboxCgroup.unlimited(info, controllers)
        procs = sorted({str(d / "cgroup.procs") for d in self.cgroup.dirs.values()})
        self._info_r, info_w = os.pipe()
        block_r, self._block_w = os.pipe()
        self._info_no, self._block_no = info_w, block_r
        self.popen: subprocess.Popen[bytes] | None = None
        self._pidfd = -1
        try:
            try:
                self.popen = subprocess.Popen(
                    ["/bin/sh", "-c", _SPARE_SH, "spare", *procs],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=(info_w, block_r),
                    env={},
                    cwd="/",
                    start_new_session=True,
                )
                self._pidfd = os.pidfd_open(self.popen.pid)  # our child, reaped by no one but us: still it
            finally:
                os.close(info_w)
                os.close(block_r)
            out = self.popen.stdout.fileno()  # type: ignore[union-attr]  # made with stdout=PIPE
            ready = select.poll()  # not select(): a busy process's descriptors go past 1024
            ready.register(out, select.POLLIN)
            ok = bool(ready.poll(_READY_S * 1000)) and os.read(out, 1) == b"r"
        except BaseException:
            self.discard()
            raise
        if not ok:
            err = self.popen.stderr.read1(2000) if self.popen.poll() is not None and self.popen.stderr else b""  # type: ignore[attr-defined]  # buffered
            self.discard()
            raise OSError(f"a spare launcher could not join its cgroup: {err.decode(errors='replace').strip() or 'no answer'}")

    @staticmethod
    def serves(argv: Sequence[str], env: Mapping[str, str]) -> bool:
        """Whether the script can run this exec as given: bwrap by absolute path, every environment name one a
        shell can export, no NUL anywhere (else the exec is moved in while held, and refused as it was)."""
        return os.path.isabs(argv[0]) and all(_NAME.match(k) for k in env) and not any("\0" in x for x in (*argv, *env.values()))

    def hold_pipes(self) -> tuple[int, int, int, int]:
        """For ``HeldExec(pipes=...)``, which owns them from then on: every exec from a spare is held."""
        pipes = (self._info_r, self._block_w, self._info_no, self._block_no)
        self._info_r = self._block_w = -1
        return pipes

    @property
    def seccomp_fd(self) -> int:
        """The descriptor bwrap's ``--seccomp`` names when ``launch`` is given a filter (the shell opens it there)."""
        return next(n for n in range(3, 10) if n not in (self._info_no, self._block_no))  # the shell's redirections: 0-9

    async def launch(self, argv: Sequence[str], env: Mapping[str, str], *, with_stdin: bool, seccomp: Path | None = None) -> AdoptedProcess:
        """Run ``argv`` (bwrap, by absolute path, given ``hold_pipes``' descriptors) with exactly ``env``;
        ``with_stdin``: its stdin stays our pipe, else /dev/null; ``seccomp``: the filter file, opened at
        ``seccomp_fd``. The shell is killed on any failure here."""
        assert self.popen is not None and self.popen.stdin is not None
        popen, pidfd, self.popen, self._pidfd = self.popen, self._pidfd, None, -1
        lines = ["unset PWD", *(f"export {k}={shlex.quote(v)}" for k, v in env.items())]
        redirs = ("" if with_stdin else " 0<>/dev/null") + (f" {self.seccomp_fd}<{shlex.quote(str(seccomp))}" if seccomp else "")
        lines.append("exec " + " ".join(map(shlex.quote, argv)) + redirs)
        data = memoryview(("\n".join(lines) + "\n").encode())
        try:
            # the shell was made by the pool's thread, with that thread's CPUs: the exec runs where its caller
            # runs, as one forked from here would (a run pinned to CPUs keeps its sandboxes on the rollout side's)
            os.sched_setaffinity(popen.pid, os.sched_getaffinity(0))
            assert popen.stdin is not None  # the spare was made with stdin=PIPE
            while data:
                data = data[os.write(popen.stdin.fileno(), data) :]
            return await AdoptedProcess.adopt(popen, pidfd, with_stdin)
        except BaseException as exc:
            _kill(popen)
            os.close(pidfd)
            if isinstance(exc, OSError):
                raise SandboxExecError(f"bwrap: the spare launcher took no command: {exc}") from exc
            raise
        finally:
            self._close()

    def _close(self) -> None:
        if self._info_r >= 0:
            os.close(self._info_r)
            self._info_r = -1
        if self._block_w >= 0:
            os.close(self._block_w)
            self._block_w = -1

    def kill(self) -> None:
        """Kill the shell unused (blocking, short) and close our ends; the cgroup stays (its owner removes it)."""
        if self.popen is not None:
            _kill(self.popen)
            self.popen = None
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1
        self._close()

    def discard(self) -> None:
        """``kill`` and remove the cgroup: a spare no sandbox took."""
        self.kill()
        self.cgroup.destroy()


def _kill(popen: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    popen.wait()
    for pipe in (popen.stdin, popen.stdout, popen.stderr):
        if pipe is not None:
            pipe.close()


class _Pool:
    """Spares ready per set of controllers, made by one thread that lives as long as this process: bwrap's
    --die-with-parent is a parent-death signal, sent when the *thread* that started a process exits, and a
    spare's bwrap is that thread's child (measured: a filler thread that ended while a spare's bwrap ran
    killed it). This process's only pool (a forked child starts its own: these shells are not its children)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.ready: dict[frozenset[str], list[Spare]] = {}
        self.wanted: dict[frozenset[str], CgroupInfo] = {}
        self.thread: threading.Thread | None = None
        self.broken = False
        self.closed = False

    def take(self, controllers: frozenset[str]) -> Spare | None:
        with self.lock:
            spares = self.ready.get(controllers)
            return spares.pop() if spares else None

    def replenish(self, info: CgroupInfo, controllers: frozenset[str]) -> None:
        with self.lock:
            if self.broken or self.closed or len(self.ready.setdefault(controllers, [])) >= SPARES:
                return
            self.wanted[controllers] = info
            if self.thread is None:
                self.thread = threading.Thread(target=self._fill, name="clawgym-spares", daemon=True)
                self.thread.start()
            self.wake.notify()

    def _short(self) -> frozenset[str] | None:
        return next((k for k in self.wanted if len(self.ready[k]) < SPARES), None)

    def _fill(self) -> None:
        """Never returns (a daemon): its end would kill every bwrap running from a spare it made."""
        while True:
            with self.lock:
                while self.closed or self.broken or (key := self._short()) is None:
                    self.wake.wait()
                info = self.wanted[key]
            try:
                spare = Spare(info, key)
            except Exception as exc:  # noqa: BLE001  never let the thread die while spares' bwraps may run
                log.warning("no spare bwrap launchers (every exec is moved into its cgroup while held): %s", exc)
                with self.lock:
                    self.broken = True
                continue
            with self.lock:
                if not self.closed:
                    self.ready[key].append(spare)
                    continue
            spare.discard()

    def close(self) -> None:
        if self.pid != os.getpid():  # a forked child's exit: these shells are its parent's
            return
        with self.lock:
            self.closed = True
            self.wake.notify()
            spares = [s for group in self.ready.values() for s in group]
            self.ready.clear()
        for s in spares:
            s.discard()


_pool: list[_Pool] = []


def _this_process() -> _Pool:
    if not _pool or _pool[0].pid != os.getpid():
        _pool[:] = [_Pool()]
        atexit.register(_pool[0].close)
    return _pool[0]


def take(controllers: frozenset[str]) -> Spare | None:
    """A ready spare in a fresh cgroup of ``controllers``, or None (none ready: ``replenish`` makes them)."""
    return _this_process().take(controllers)


def replenish(info: CgroupInfo, controllers: frozenset[str]) -> None:
    """Have spares of ``controllers`` made in the pool's thread until ``SPARES`` are ready. Called once an
    exec's command runs, so that the making does not delay the start of any."""
    _this_process().replenish(info, controllers)


def drop_spares() -> None:
    """Kill the spares ready now (a later ``take`` makes new ones): for a caller counting its descriptors."""
    if _pool and _pool[0].pid == os.getpid():
        _pool.pop().close()
