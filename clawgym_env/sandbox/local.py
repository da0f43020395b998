"""Backend "none": no isolation at all. For debugging a harness on the host, never a default.

Processes run on the host in a temporary copy of the workspace, as the calling user, with the
host network. Absolute paths inside the "sandbox" are mapped into a per-sandbox folder for
``upload``/``download`` only; the commands themselves see the real host filesystem. The proxy
socket is forwarded to ``127.0.0.1:proxy_port`` on the host by an in-process forwarder.
Every start logs a warning, and choosing this backend is always explicit.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from clawgym_env.errors import ConfigError, SandboxExecError, SandboxStartError
from clawgym_env.sandbox._fs import inside_path, move_into, rmtree_hard, sanitize_tree
from clawgym_env.sandbox._process import ChildProcess, kill_process_group, start_process
from clawgym_env.sandbox.base import ExecResult, OutputCallback, Sandbox, SandboxConfig, SandboxState

__all__ = ["LocalSandbox", "NoIsolationWarning"]

log = logging.getLogger("clawgym.sandbox")


class NoIsolationWarning(UserWarning):
    """Issued whenever a "none" sandbox starts: the episode can read and change the host."""


class LocalSandbox(Sandbox):
    """Runs commands on the host in a temp folder. NOT a sandbox; debugging only."""

    name = "none"

    def __init__(self, config: SandboxConfig) -> None:
        super().__init__(config)
        self.dir: Path | None = None
        self._procs: set[ChildProcess] = set()
        self._server: asyncio.AbstractServer | None = None

    @property
    def workspace(self) -> Path:
        """The host folder that stands in for the workspace."""
        assert self.dir is not None
        return self.dir / "workspace"

    async def start(self) -> None:
        if self.state is not SandboxState.CREATED:
            raise SandboxStartError(f"none sandbox: start() called in state {self.state.value}")
        if self.config.workspace_layers:
            raise ConfigError("SandboxConfig.workspace_layers: bwrap only; backend 'none' takes one workspace_src")
        msg = "sandbox backend 'none': NO ISOLATION, commands run on the host as this user (debugging only)"
        warnings.warn(msg, NoIsolationWarning, stacklevel=2)
        log.warning(msg)
        self.dir = Path(tempfile.mkdtemp(prefix="clawgym-none-"))
        if self.config.workspace_src is not None:
            await asyncio.to_thread(shutil.copytree, self.config.workspace_src, self.workspace, symlinks=True)
        else:
            self.workspace.mkdir()
        (self.dir / "root").mkdir()
        if self.config.proxy_socket is not None:
            try:
                self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.config.proxy_port)
            except OSError as exc:
                rmtree_hard(self.dir)
                raise SandboxStartError(
                    f"none sandbox: cannot listen on 127.0.0.1:{self.config.proxy_port} ({exc}); pick a free SandboxConfig.proxy_port"
                ) from exc
        self.state = SandboxState.STARTED

    async def _forward(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_unix_connection(str(self.config.proxy_socket))
        except OSError:
            w.close()
            return

        async def pipe(a: asyncio.StreamReader, b: asyncio.StreamWriter) -> None:
            try:
                while data := await a.read(65536):
                    b.write(data)
                    await b.drain()
            except OSError:
                pass
            finally:
                b.close()

        await asyncio.gather(pipe(r, uw), pipe(ur, w))

    def _host_path(self, path: str) -> Path:
        p = inside_path(path, self.config.workspace_mount)
        ws = self.config.workspace_mount.rstrip("/")
        assert self.dir is not None
        if p == ws or p.startswith(ws + "/"):
            return self.workspace / p[len(ws) :].lstrip("/")
        return self.dir / "root" / p.lstrip("/")

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
        """Run ``cmd`` on the host in the workspace copy (``cwd`` maps like upload paths)."""
        if self.state is not SandboxState.STARTED:
            raise SandboxExecError(f"none sandbox: exec in state {self.state.value}; call start() first")
        full_env = {**os.environ, **self.config.env, **(env or {})}
        running = await start_process(
            list(cmd), env=full_env, cwd=str(self._host_path(cwd or self.config.workspace_mount)),
            with_stdin=stdin is not None, on_output=on_output, max_output_bytes=max_output_bytes,
            on_start=self._procs.add,
        )  # fmt: skip
        result = await running.finish(stdin, timeout if timeout is not None else self.config.wall_time_s)
        self._procs = {p for p in self._procs if p.returncode is None}
        return result

    async def reap(self) -> None:
        """Kill the process groups started here (a process that left its group escapes: no isolation)."""
        for p in list(self._procs):
            kill_process_group(p)
            await p.wait()
        self._procs.clear()

    async def upload(self, src: Path, dest: str) -> None:
        """Copy a host file or folder to the mapped destination."""
        src = Path(src)
        if not src.exists():
            raise SandboxExecError(f"upload: host path {src} does not exist")
        target = self._host_path(dest)
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            await asyncio.to_thread(shutil.copytree, src, target, symlinks=True, dirs_exist_ok=True)
        else:
            await asyncio.to_thread(shutil.copy2, src, target)

    async def download(self, src: str, dest: Path) -> list[str]:
        """Copy the mapped ``src`` to ``dest``."""
        source = self._host_path(src)
        if not source.exists():
            raise SandboxExecError(f"download {src}: no such file or folder")
        assert self.dir is not None
        tmp = self.dir / "out"
        if source.is_dir():
            await asyncio.to_thread(shutil.copytree, source, tmp, symlinks=True)
        else:
            shutil.copy2(source, tmp)
        skipped = sanitize_tree(tmp)
        await asyncio.to_thread(move_into, tmp, Path(dest))
        return skipped

    async def close(self) -> None:
        """Kill the process groups started here and remove the temp folder; idempotent."""
        if self.state is SandboxState.CLOSED:
            return
        self.state = SandboxState.CLOSED
        for p in list(self._procs):
            kill_process_group(p)
            await p.wait()
        if self._server is not None:
            self._server.close()
        if self.dir is not None:
            await asyncio.to_thread(rmtree_hard, self.dir)
            self.dir = None
