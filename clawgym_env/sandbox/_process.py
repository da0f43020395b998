"""Run one host process to completion: stream its output, cap what is kept, enforce a deadline.

Shared by the bwrap and none backends. Killing is delegated to a callback because only the
backend knows how to kill the *whole* tree (bwrap: the outer bwrap, whose death takes the pid
namespace with it; none: the process group).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from clawgym_env.errors import SandboxExecError
from clawgym_env.sandbox.base import ExecResult, OutputCallback, Spawned

__all__ = ["ChildProcess", "OutputBuffer", "Running", "SpawnedProcess", "adopt", "start_process"]

_CHUNK = 65536


class OutputBuffer:
    """Keeps the first ``limit`` bytes of a stream and counts what it dropped."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - self.kept
        if room > 0:
            piece = chunk[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        out = b"".join(self.parts).decode("utf-8", errors="replace")
        if self.dropped:
            out += f"\n[clawgym: output truncated, {self.dropped} bytes dropped]\n"
        return out


async def _pump(reader: asyncio.StreamReader, name: str, buf: OutputBuffer, on_output: OutputCallback | None) -> None:
    while chunk := await reader.read(_CHUNK):
        buf.add(chunk)
        if on_output is not None:
            res = on_output(name, chunk)
            if inspect.isawaitable(res):
                await res


async def _feed(writer: asyncio.StreamWriter | None, data: bytes | None) -> None:
    if writer is None:
        return
    try:
        if data:
            writer.write(data)
            await writer.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        writer.close()


def kill_process_group(proc: ChildProcess) -> None:
    """SIGKILL ``proc``'s process group (it was started in its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class ChildProcess(Protocol):
    """What is used of a started process: ``asyncio.subprocess.Process``, or one started ahead and driven on
    the event loop later (``_bwrap_spare.AdoptedProcess``)."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def stdin(self) -> asyncio.StreamWriter | None: ...
    @property
    def stdout(self) -> asyncio.StreamReader | None: ...
    @property
    def stderr(self) -> asyncio.StreamReader | None: ...
    async def wait(self) -> int: ...


class Running:
    """A started process whose stdin and deadline come later (``finish``): a grader started while
    the episode runs waits on its stdin, so its start-up is off the episode's critical path."""

    def __init__(
        self,
        proc: ChildProcess,
        max_output_bytes: int,
        on_output: OutputCallback | None,
        kill: Callable[[ChildProcess], None],
        classify: Callable[[], Awaitable[str | None]] | None,
        has_stdin: bool,
    ) -> None:
        self.proc = proc
        self._kill = kill
        self._classify = classify
        self._has_stdin = has_stdin
        self._out, self._err = OutputBuffer(max_output_bytes), OutputBuffer(max_output_bytes)
        assert proc.stdout is not None and proc.stderr is not None
        self._pumps = asyncio.gather(_pump(proc.stdout, "stdout", self._out, on_output), _pump(proc.stderr, "stderr", self._err, on_output))
        self._finished = False

    @property
    def alive(self) -> bool:
        """Still running: not exited, not yet given its input."""
        return self.proc.returncode is None and not self._finished

    async def finish(self, stdin: bytes | None, timeout: float | None) -> ExecResult:
        """Feed ``stdin`` (then EOF), wait up to ``timeout`` s from now, kill the tree at the deadline."""
        if self._finished:
            raise SandboxExecError("this process was already finished")
        self._finished = True
        if stdin is not None and not self._has_stdin:
            raise SandboxExecError("stdin given to a process started without one")
        t0 = time.perf_counter()
        work = asyncio.gather(self._pumps, _feed(self.proc.stdin, stdin), self.proc.wait())
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(work), timeout)
        except TimeoutError:
            timed_out = True
            self._kill(self.proc)
            await _drain_after_kill(work, self.proc)
        except BaseException:  # cancelled: never leave the tree running
            self._kill(self.proc)
            await _drain_after_kill(work, self.proc)
            raise
        limit = "wall_time" if timed_out else (await self._classify() if self._classify is not None else None)
        return ExecResult(
            return_code=self.proc.returncode if self.proc.returncode is not None else -9,
            stdout=self._out.text(),
            stderr=self._err.text(),
            duration_s=time.perf_counter() - t0,
            timed_out=timed_out,
            killed_by_limit=limit,
        )

    def kill(self) -> None:
        """Kill its whole tree now; ``finish`` still reports how it ended."""
        self._kill(self.proc)

    async def discard(self) -> None:
        """Kill it unused (idempotent)."""
        if self._finished:
            return
        self._finished = True
        self._kill(self.proc)
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        await _drain_after_kill(asyncio.gather(self._pumps, self.proc.wait()), self.proc)


async def start_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | None,
    with_stdin: bool,
    on_output: OutputCallback | None,
    max_output_bytes: int,
    kill: Callable[[ChildProcess], None] = kill_process_group,
    on_start: Callable[[ChildProcess], None] | None = None,
    classify: Callable[[], Awaitable[str | None]] | None = None,
    pass_fds: Sequence[int] = (),
) -> Running:
    """Start ``argv`` in a new session with its output streaming; ``Running.finish`` feeds its stdin, caps
    what is kept of its output and kills it at the deadline. ``classify`` is asked after exit which limit
    (if any) ended the process ("memory", "pids")."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if with_stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    except OSError as exc:
        raise SandboxExecError(f"cannot start {argv[0]!r}: {exc}") from exc
    return adopt(
        proc, with_stdin=with_stdin, on_output=on_output, max_output_bytes=max_output_bytes, kill=kill, on_start=on_start, classify=classify
    )


def adopt(
    proc: ChildProcess,
    *,
    with_stdin: bool,
    on_output: OutputCallback | None,
    max_output_bytes: int,
    kill: Callable[[ChildProcess], None] = kill_process_group,
    on_start: Callable[[ChildProcess], None] | None = None,
    classify: Callable[[], Awaitable[str | None]] | None = None,
) -> Running:
    """A ``Running`` over a process already started (``start_process``'s, or a spare launcher's)."""
    if on_start is not None:
        on_start(proc)
    return Running(proc, max_output_bytes, on_output, kill, classify, with_stdin)


async def _drain_after_kill(work: asyncio.Future[Any], proc: ChildProcess) -> None:
    """Wait for the killed process; give pipes held open by stray children a short grace."""
    await proc.wait()
    try:
        await asyncio.wait_for(asyncio.shield(work), 2.0)
    except (TimeoutError, Exception):  # noqa: BLE001 - whatever the stray pipes did, the drain gives up
        work.cancel()
        try:
            await work
        except BaseException:  # noqa: BLE001 - the cancelled drain ends as it may
            pass


class SpawnedProcess(Spawned):
    """A backend's ``Spawned``: a ``Running`` process, ``on_end`` called once it is over, and an optional
    ``fix`` of its result (bwrap: a command not found exits 127, as from a shell)."""

    def __init__(
        self,
        running: Running,
        on_end: Callable[[], None],
        default_timeout: float | None,
        fix: Callable[[ExecResult], ExecResult] | None = None,
    ) -> None:
        self._running, self._on_end, self._default_timeout, self._fix = running, on_end, default_timeout, fix

    @property
    def alive(self) -> bool:
        return self._running.alive

    async def finish(self, stdin: bytes | None, timeout: float | None) -> ExecResult:
        try:
            result = await self._running.finish(stdin, timeout if timeout is not None else self._default_timeout)
        finally:
            self._on_end()
        return self._fix(result) if self._fix is not None else result

    async def discard(self) -> None:
        try:
            await self._running.discard()
        finally:
            self._on_end()
