"""The sandbox contract: one throwaway, isolated environment per episode.

A sandbox holds one workspace (seeded from the task) that every process of the episode sees
at ``config.workspace_mount``: the harness, the commands it runs, and the verifier afterwards.
Its only way out is the model proxy, reachable inside at ``http://127.0.0.1:{config.proxy_port}``.
Hidden verifier files stay on the host until ``upload`` copies them in after the agent is done.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["AGENT_UID", "JAIL_ENV", "ExecResult", "FinalLayers", "Mount", "Sandbox", "SandboxConfig", "SandboxState", "Spawned"]

OutputCallback = Callable[[str, bytes], Awaitable[None] | None]
"""Called with (stream name "stdout"/"stderr", chunk) as a process writes."""


@dataclass(frozen=True)
class Mount:
    """A host path made visible inside the sandbox (read-only unless ``writable``)."""

    host: Path
    inside: str
    writable: bool = False


JAIL_ENV = "CLAWGYM_JAIL"
"""Set in a sealed sandbox: how graders run the agent's code away from them (``grading._agent_jail``)."""
AGENT_UID = 1000
"""The uid the agent's code runs as in a docker grading jail (the episode's "user")."""


@dataclass(frozen=True)
class SandboxConfig:
    """How to build a sandbox; the same config works on every backend."""

    workspace_mount: str = "/workspace"
    """Absolute path of the workspace inside the sandbox (ClawGym tasks use /root/.openclaw/workspace)."""
    workspace_src: Path | None = None
    """Host folder whose contents seed the workspace (copy-on-write; never modified)."""
    workspace_layers: tuple[Path, ...] = ()
    """Read-only host layers stacked over ``workspace_src``, bottom first (bwrap only: overlay lower
    layers). ``FinalLayers`` of a finished sandbox go here to grade its workspace without a copy."""
    proxy_socket: Path | None = None
    """Host unix socket of the model proxy; forwarded to 127.0.0.1:proxy_port inside. None: no way out."""
    proxy_port: int = 8787
    mounts: tuple[Mount, ...] = ()
    """Extra read-only binds, e.g. a harness install or a Node runtime."""
    env: Mapping[str, str] = field(default_factory=dict)
    memory_mb: int | None = 4096
    pids: int | None = 512
    cpus: float | None = None
    wall_time_s: float | None = None
    """Default wall-clock limit for each exec (per-call timeout overrides)."""
    rootfs: Path | None = None
    """A root filesystem to use instead of the host's system folders (bwrap) or the image (docker)."""
    image: str | None = None
    """Docker image (docker backend only)."""
    user: str = "root"
    """"root" (uid 0 inside a user namespace) or "user" (an unprivileged uid inside)."""
    sealed: bool = False
    """A grading sandbox: no process may reach into another (ptrace-family syscalls refused), no
    proxy, and a jail for the agent's code (``JAIL_ENV``) that cannot read ``mounts`` (the
    grader's: hidden files, payload) nor reach the grader's processes. ``user`` is ignored: the
    grader runs as bwrap's unprivileged "user", or as docker's root with only the capabilities
    the jail needs (setuid/setgid/chown/dac_override/fowner). See ``clawgym_env.grading.grade``."""
    disk_mb: int | None = 8192
    """Docker: size of the workspace and of every writable folder (tmpfs), so a flood cannot fill
    the host disk. bwrap keeps its folders on tmpfs, charged to the memory limit. Both: what a
    download takes out holds at most this much (apparent sizes; a sparse file is counted whole)."""

    max_files: int | None = 100_000
    """How many files and folders the sandbox's writable folders (workspace, HOME, /tmp) may hold: the inodes
    of their own tmpfs, so creating one more fails inside (ENOSPC) while the episode runs, and what is left
    goes with one unmount. Needs host root (both backends mount it); without it, bwrap has no such bound
    (``clawgym sandbox doctor`` says so)."""

    @property
    def disk_bytes(self) -> int | None:
        return self.disk_mb << 20 if self.disk_mb else None


@dataclass(frozen=True)
class ExecResult:
    """What a finished process left: its exit code and captured output."""

    return_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    killed_by_limit: str | None = None
    """"memory", "pids" or "wall_time" when a limit ended the process."""


@dataclass(frozen=True)
class FinalLayers:
    """A reaped sandbox's final workspace as host layers, shared read-only instead of copied out.

    Already cleaned as a download would be (escaping symlinks, special files, setuid bits gone).
    Valid until the sandbox is closed."""

    src: Path | None
    """The bottom layer (the sandbox's ``workspace_src``; None: empty)."""
    layers: tuple[Path, ...]
    """The layers above it, bottom first (its own ``workspace_layers``, then what it wrote)."""
    skipped: tuple[str, ...] = ()
    """Special files (FIFOs, sockets, devices) removed, relative to the workspace."""


class Spawned(abc.ABC):
    """A command given to a sandbox ahead of its input (``Sandbox.spawn``): ``finish`` feeds stdin and
    runs it to completion, ``discard`` drops it unused. Backends that can start it at once do so."""

    @property
    @abc.abstractmethod
    def alive(self) -> bool:
        """Ready for ``finish``: not exited on its own, not finished or discarded."""

    @abc.abstractmethod
    async def finish(self, stdin: bytes | None, timeout: float | None) -> ExecResult:
        """Give it ``stdin`` and wait up to ``timeout`` seconds from now, as ``Sandbox.exec`` does."""

    @abc.abstractmethod
    async def discard(self) -> None:
        """Kill it without running it further (idempotent)."""


class _Deferred(Spawned):
    """The default ``spawn``: nothing runs until ``finish``, which is a plain ``exec``."""

    def __init__(
        self,
        sandbox: Sandbox,
        cmd: Sequence[str],
        env: Mapping[str, str] | None,
        cwd: str | None,
        max_output_bytes: int,
        on_output: OutputCallback | None,
    ) -> None:
        self._sandbox, self._cmd, self._env, self._cwd, self._max = sandbox, list(cmd), env, cwd, max_output_bytes
        self._on_output = on_output
        self._done = False

    @property
    def alive(self) -> bool:
        return not self._done

    async def finish(self, stdin: bytes | None, timeout: float | None) -> ExecResult:
        self._done = True
        return await self._sandbox.exec(
            self._cmd, env=self._env, cwd=self._cwd, timeout=timeout, stdin=stdin, on_output=self._on_output, max_output_bytes=self._max
        )

    async def discard(self) -> None:
        self._done = True


class SandboxState(enum.Enum):
    CREATED = "created"
    STARTED = "started"
    CLOSED = "closed"


class Sandbox(abc.ABC):
    """One episode's isolated environment. Use as ``async with backend_cls(config) as sb:``.

    ``close()`` is idempotent and leaves nothing behind: processes, mounts, cgroups, temp dirs.
    """

    name: str = "base"

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.state = SandboxState.CREATED

    @abc.abstractmethod
    async def start(self) -> None:
        """Create the sandbox and seed its workspace."""

    @abc.abstractmethod
    async def exec(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        on_output: OutputCallback | None = None,
        max_output_bytes: int = 16 * 1024 * 1024,
    ) -> ExecResult:
        """Run ``cmd`` inside; on timeout kill its whole process tree and return timed_out=True."""

    async def spawn(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        on_output: OutputCallback | None = None,
        max_output_bytes: int = 16 * 1024 * 1024,
    ) -> Spawned:
        """``cmd`` made ready now, given its stdin and deadline later (``Spawned.finish``). bwrap starts
        the process at once (it must read nothing it is not given before its stdin arrives: a grader
        started while the agent runs); the default defers everything to ``finish``. ``on_output`` as
        for ``exec``."""
        return _Deferred(self, cmd, env, cwd, max_output_bytes, on_output)

    @abc.abstractmethod
    async def reap(self) -> None:
        """Kill every process still running in the sandbox (by namespace or cgroup, whatever it did to
        hide: a new session, a cleared environment); the sandbox stays usable for files."""

    @abc.abstractmethod
    async def upload(self, src: Path, dest: str) -> None:
        """Copy a host file or folder to ``dest`` inside (absolute, or relative to the workspace)."""

    @abc.abstractmethod
    async def download(self, src: str, dest: Path) -> list[str]:
        """Copy ``src`` inside (absolute, or relative to the workspace) to the host path ``dest``.

        Only files, folders and symlinks staying inside come out, without setuid/setgid bits;
        returns the special files (FIFOs, sockets, devices) left out, relative to ``src``."""

    def layers_ahead(self) -> FinalLayers | None:
        """The layers ``final_layers`` will return (``skipped`` aside), known before the agent is done, for
        a grading sandbox started early; they hold none of the agent's work until ``final_layers`` has
        run. None where the backend shares no layers (the default)."""
        return None

    async def final_layers(self) -> FinalLayers | None:
        """After ``reap``: the final workspace as layers another sandbox of this backend can stack
        (``SandboxConfig.workspace_layers``), cleaned in place; None where the backend cannot share
        them (then ``download`` it). The default: None."""
        return None

    @abc.abstractmethod
    async def close(self) -> None:
        """Kill everything and remove every trace; idempotent."""

    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
