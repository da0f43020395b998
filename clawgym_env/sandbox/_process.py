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

from clawgym_env.errors import SandboxExecError
from clawgym_env.sandbox.base import ExecResult, OutputCallback

__all__ = ["OutputBuffer", "run_process"]

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


async def _pump(
    reader: asyncio.StreamReader, name: str, buf: OutputBuffer, on_output: OutputCallback | None
) -> None:
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


def kill_process_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL ``proc``'s process group (it was started in its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | None,
    timeout: float | None,
    stdin: bytes | None,
    on_output: OutputCallback | None,
    max_output_bytes: int,
    kill: Callable[[asyncio.subprocess.Process], None] = kill_process_group,
    on_start: Callable[[asyncio.subprocess.Process], None] | None = None,
    classify: Callable[[], Awaitable[str | None]] | None = None,
    pass_fds: Sequence[int] = (),
) -> ExecResult:
    """Start ``argv`` in a new session, stream and cap its output, kill it at the deadline.

    ``classify`` is asked after exit which limit (if any) ended the process ("memory", "pids").
    """
    t0 = time.perf_counter()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    except OSError as exc:
        raise SandboxExecError(f"cannot start {argv[0]!r}: {exc}") from exc
    if on_start is not None:
        on_start(proc)
    out, err = OutputBuffer(max_output_bytes), OutputBuffer(max_output_bytes)
    assert proc.stdout is not None and proc.stderr is not None
    work = asyncio.gather(
        _pump(proc.stdout, "stdout", out, on_output),
        _pump(proc.stderr, "stderr", err, on_output),
        _feed(proc.stdin, stdin),
        proc.wait(),
    )
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(work), timeout)
    except TimeoutError:
        timed_out = True
        kill(proc)
        await _drain_after_kill(work, proc)
    except BaseException:  # cancelled: never leave the tree running
        kill(proc)
        await _drain_after_kill(work, proc)
        raise
    limit = "wall_time" if timed_out else (await classify() if classify is not None else None)
    return ExecResult(
        return_code=proc.returncode if proc.returncode is not None else -9,
        stdout=out.text(),
        stderr=err.text(),
        duration_s=time.perf_counter() - t0,
        timed_out=timed_out,
        killed_by_limit=limit,
    )


async def _drain_after_kill(work: asyncio.Future[object], proc: asyncio.subprocess.Process) -> None:
    """Wait for the killed process; give pipes held open by stray children a short grace."""
    await proc.wait()
    try:
        await asyncio.wait_for(asyncio.shield(work), 2.0)
    except (TimeoutError, Exception):
        work.cancel()
        try:
            await work
        except BaseException:
            pass
