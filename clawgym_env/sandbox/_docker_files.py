"""Files in and out of a docker sandbox: ``upload`` (a tar streamed into ``tar -x`` inside: docker refuses
``put_archive`` on a read-only root filesystem) and ``download`` (``tar -c`` inside, streamed out, then
cleaned: no symlink leading out, no special file). The whole workspace, once every agent process is reaped,
is read host-side instead: a ``tar`` inside would run in the container's memory cgroup, which an agent can
fill with workspace files (tmpfs pages are charged to it), and the copy would be killed; the agent would
turn its failed episode into an infrastructure error. ``docker.DockerSandbox`` holds the state used here."""

from __future__ import annotations

import asyncio
import io
import posixpath
import tarfile
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from clawgym_env.errors import SandboxExecError
from clawgym_env.sandbox._fs import copy_tree_safely, inside_path, move_into, rmtree_hard, sanitize_tree, strip_escaping_symlinks
from clawgym_env.sandbox.base import ExecResult, Sandbox

__all__ = ["RO_TMPFS", "DockerFiles"]

RO_TMPFS = ("/tmp", "/var/tmp", "/run")
"""Writable folders of a container whose root filesystem is read-only (tmpfs, size-limited)."""


class DockerFiles(Sandbox):
    """``upload`` and ``download`` for ``DockerSandbox``, over the state and the exec it declares here."""

    dir: Path | None
    home: str
    uid: int

    _reaped: bool
    """Every process the agent started is dead and nothing has run since (``reap``): nothing can swap
    a workspace file for a link while the host reads it."""

    _exec_raw: Callable[..., Awaitable[ExecResult]]
    """One ``docker exec`` of an argv (keywords: cwd, user, stdin, on_output, max_output_bytes): ``DockerSandbox._exec_raw``."""

    def _check_target(self, path: str) -> None:
        roots = [self.home, *RO_TMPFS, *(m.inside for m in self.config.mounts if m.writable)]
        if not any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            raise SandboxExecError(
                f"{path} is not writable in the sandbox (its root filesystem is read-only); copy into the "
                f"workspace ({self.config.workspace_mount}), {self.home} or /tmp"
            )

    async def upload(self, src: Path, dest: str) -> None:
        """Copy a host file or folder in (``put_archive``); folders merge into an existing folder."""
        src = Path(src)
        if not src.exists():
            raise SandboxExecError(f"upload: host path {src} does not exist")
        target = inside_path(dest, self.config.workspace_mount)
        if not target.startswith(self.config.workspace_mount):
            self._check_target(target)
        parent, name = posixpath.split(target)
        mk = await self._exec_raw(["mkdir", "-p", parent], user="0")
        if mk.return_code != 0:
            raise SandboxExecError(f"upload: cannot create {parent}: {mk.stderr.strip()}")

        def build() -> bytes:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:

                def owner(ti: tarfile.TarInfo) -> tarfile.TarInfo:
                    ti.uid = ti.gid = self.uid
                    ti.uname = ti.gname = ""
                    return ti

                tar.add(src, arcname=name, filter=owner)
            return buf.getvalue()

        data = await asyncio.to_thread(build)
        # tar on stdin, not put_archive: docker refuses put_archive on a read-only root filesystem
        r = await self._exec_raw(["tar", "-x", "-f", "-", "-C", parent], user="0", stdin=data, cwd="/")
        if r.return_code != 0:
            raise SandboxExecError(f"upload {src} -> {target} failed: {r.stderr.strip()}")

    async def download(self, src: str, dest: Path) -> list[str]:
        """Copy ``src`` out (``tar`` inside, streamed: ``get_archive`` cannot see tmpfs mounts);
        symlinks leading outside it are dropped."""
        source = inside_path(src, self.config.workspace_mount)
        assert self.dir is not None
        if self._reaped and source == self.config.workspace_mount:
            return await asyncio.to_thread(self._download_workspace, Path(dest))
        out = Path(tempfile.mkdtemp(dir=self.dir, prefix="out-"))
        tar_path = out / "a.tar"
        skipped: list[str] = []
        try:
            with open(tar_path, "wb") as sink:
                r = await self._exec_raw(
                    ["tar", "-c", "-S", "-f", "-", "-C", posixpath.dirname(source) or "/", posixpath.basename(source)],
                    cwd="/", on_output=lambda stream, chunk: sink.write(chunk) if stream == "stdout" else None,
                    max_output_bytes=65536,
                )  # fmt: skip
            if r.return_code != 0:
                raise SandboxExecError(f"download {source}: {r.stderr.strip() or f'tar exited {r.return_code}'}")

            def extract() -> Path:
                with tarfile.open(tar_path) as tar:
                    members = tar.getmembers()
                    plain = [m for m in members if m.isreg() or m.isdir() or m.issym() or m.islnk()]
                    skipped.extend(m.name.split("/", 1)[1] if "/" in m.name else m.name for m in members if m not in plain)
                    tar.extractall(out / "x", members=plain, filter=_safe_filter)
                return out / "x" / posixpath.basename(source)

            top = await asyncio.to_thread(extract)
            strip_escaping_symlinks(top)
            skipped.extend(sanitize_tree(top, max_bytes=self.config.disk_bytes))
            await asyncio.to_thread(move_into, top, Path(dest))
            return sorted(skipped)
        finally:
            rmtree_hard(out)

    def _download_workspace(self, dest: Path) -> list[str]:
        """The reaped workspace, copied from the host side of its mount (files, folders, links only)."""
        assert self.dir is not None
        out = Path(tempfile.mkdtemp(dir=self.dir, prefix="out-"))
        try:
            skipped = copy_tree_safely(self.dir / "workspace", out / "x", max_bytes=self.config.disk_bytes)
            strip_escaping_symlinks(out / "x")
            move_into(out / "x", dest)
            return sorted(skipped)
        finally:
            rmtree_hard(out)


def _safe_filter(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    """tarfile's "data" filter, but links pointing out are skipped instead of failing the copy."""
    try:
        return tarfile.data_filter(member, path)
    except tarfile.FilterError:
        if member.issym() or member.islnk():
            return None
        raise
