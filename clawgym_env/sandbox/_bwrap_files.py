"""Files in and out of a bwrap sandbox: ``upload`` (a host-side copy while nothing has run inside yet, else a
copy made inside over a read-only bind) and ``download`` (copied out through a private bind, then cleaned:
no symlink leading out, no special file, no setuid bit). ``bwrap.BwrapSandbox`` holds the state used here."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import uuid
from collections.abc import Sequence
from pathlib import Path

from clawgym_env.errors import SandboxExecError
from clawgym_env.sandbox._bwrap_host import RESERVED_TOP
from clawgym_env.sandbox._fs import (
    DEEPER,
    MAX_DEPTH,
    host_path_in,
    inside_path,
    move_into,
    rmtree_hard,
    sanitize_tree,
    strip_escaping_symlinks,
)
from clawgym_env.sandbox.base import ExecResult, Sandbox

__all__ = ["BwrapFiles"]

_IO = "/run/clawgym-io"
_COPY_OUT = (
    'find "$1" -mindepth %d -type d -prune -printf "%%P\\0" -execdir rm -rf {} + ; '  # noqa: UP031 - braces are find's
    'exec cp -R --preserve=mode,timestamps "$1" "$2"' % (MAX_DEPTH + 1)
)
"""The copy made inside for ``download``: folders deeper than ``MAX_DEPTH`` are removed first (their
paths printed), as cp cannot name what lies past PATH_MAX and the host's tree walks fail on them."""


class BwrapFiles(Sandbox):
    """``upload`` and ``download`` for ``BwrapSandbox``, over the state and the exec it declares here."""

    dir: Path | None
    home: str
    uid: int
    _extra: dict[str, Path]
    """Top-level folders ``upload`` created inside (e.g. /verifier) -> their host folder."""
    _pristine: bool
    """Nothing has run inside yet: every host folder holds only what the sandbox object wrote there."""

    async def _run_io(self, cmd: Sequence[str], binds: Sequence[str]) -> ExecResult:
        """Run ``cmd`` inside with extra ``binds``, no proxy, from /: ``BwrapSandbox`` provides it."""
        raise NotImplementedError

    def _ensure_writable(self, path: str) -> None:
        """Make sure ``path`` lies in a writable, persistent folder; create /<top> if new."""
        assert self.dir is not None
        roots = [self.config.workspace_mount, self.home, "/tmp", *self._extra]
        roots += [m.inside for m in self.config.mounts if m.writable]
        if any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            return
        top = path.split("/")[1] if path.count("/") >= 1 else ""
        reserved = set(RESERVED_TOP)
        if self.config.rootfs is not None:
            reserved |= {p.name for p in Path(self.config.rootfs).iterdir()}
        reserved |= {"root", "home", "tmp"}
        if not top or top in reserved or any(m.inside.split("/")[1] == top for m in self.config.mounts):
            raise SandboxExecError(
                f"{path} is not writable in the sandbox; copy into the workspace "
                f"({self.config.workspace_mount}), {self.home}, /tmp, or a new top-level folder such as /verifier"
            )
        host = self.dir / "extra" / top
        host.mkdir(exist_ok=True)
        self._extra[f"/{top}"] = host

    async def upload(self, src: Path, dest: str) -> None:
        """Copy a host file or folder into the sandbox (folders merge into an existing folder)."""
        src = Path(src)
        if not src.exists():
            raise SandboxExecError(f"upload: host path {src} does not exist")
        target = inside_path(dest, self.config.workspace_mount)
        self._ensure_writable(target)
        assert self.dir is not None  # started: _ensure_writable refused otherwise
        roots = {self.home: self.dir / "home", "/tmp": self.dir / "tmp", **self._extra}
        if self._pristine and src.is_file() and (host := host_path_in(target, roots, self.config.mounts)) is not None:
            # Nothing has run inside yet, so these folders hold only what we wrote: a host-side copy
            # equals the in-sandbox cp and saves a bwrap start (the harness's config files).
            host.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, host)
            return
        staged = f"{_IO}/in"
        if src.is_dir():
            script = 'mkdir -p "$2" && cp -R --preserve=mode,timestamps "$1"/. "$2"/'
        else:
            script = 'mkdir -p "$(dirname "$2")" && cp --preserve=mode,timestamps "$1" "$2"'
        r = await self._run_io(["/bin/sh", "-c", script, "upload", staged, target], ["--ro-bind", str(src), staged])
        if r.return_code != 0:
            raise SandboxExecError(f"upload {src} -> {target} failed: {r.stderr.strip()}")

    async def download(self, src: str, dest: Path) -> list[str]:
        """Copy ``src`` out of the sandbox to ``dest``; symlinks leading outside it are dropped."""
        assert self.dir is not None
        source = inside_path(src, self.config.workspace_mount)
        out = self.dir / f"out-{uuid.uuid4().hex[:10]}"
        out.mkdir()
        os.chmod(out, stat.S_IRWXU)
        try:
            # as root inside, it reads what the agent made unreadable (chmod 000), or the copy failed: an error
            caps = ["--cap-add", "CAP_DAC_READ_SEARCH"] if self.uid == 0 else []
            r = await self._run_io(
                ["/bin/sh", "-c", _COPY_OUT, "download", source, f"{_IO}/out/x"], ["--bind", str(out), f"{_IO}/out", *caps]
            )
            if r.return_code != 0:
                raise SandboxExecError(f"download {source}: {r.stderr.strip() or 'cp failed'}")
            deep = [p + DEEPER for p in r.stdout.split("\0") if p]
            strip_escaping_symlinks(out / "x")
            skipped = sorted(deep + sanitize_tree(out / "x", max_bytes=self.config.disk_bytes))
            await asyncio.to_thread(move_into, out / "x", Path(dest))
            return skipped
        finally:
            rmtree_hard(out)
