"""The docker backend (docker-py): one container per sandbox, one ``docker exec`` per process.

The container runs the base image (``clawgym-base:latest``, built by ``scripts/docker-up.sh``)
with ``network_mode="none"``, HostConfig limits (memory, pids, cpus), docker's init as pid 1,
and the workspace as a bind-mounted host copy of ``workspace_src``. The proxy socket is
bind-mounted at ``/run/clawgym/proxy.sock`` and a socat forwarder, started once with the
container, listens on ``127.0.0.1:proxy_port`` inside.

A container per sandbox with exec per process was chosen over a container per process:
measured with bench/sandbox.py on the 2-core dev box (load ~11), an exec took 142 ms median
against 868 ms to create and remove a container, and uploads to /verifier persist without
extra volumes. Every exec carries a marker in its environment; when
its main process ends (or times out) every process still carrying the marker is killed, so
stragglers die with their exec as in the bwrap backend. ``close`` removes the container.
"""

from __future__ import annotations

import asyncio
import io
import os
import posixpath
import shutil
import tarfile
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError, SandboxExecError, SandboxStartError
from clawgym_env.sandbox import _bridge
from clawgym_env.sandbox._cgroup import limit_counters, limit_fired
from clawgym_env.sandbox._fs import inside_path, move_into, rmtree_hard, strip_escaping_symlinks
from clawgym_env.sandbox._process import OutputBuffer
from clawgym_env.sandbox.base import ExecResult, OutputCallback, Sandbox, SandboxConfig, SandboxState

__all__ = ["DEFAULT_IMAGE", "DockerSandbox"]

DEFAULT_IMAGE = "clawgym-base:latest"
_RESERVED_TOP = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "etc", "proc", "sys", "dev", "boot", "run", "var"}
_REAP_BODY = (
    'for p in /proc/[0-9]*; do [ "${p#/proc/}" = "$$" ] && continue; '
    'grep -qz "^CLAWGYM_EXEC=$id\\$" "$p/environ" 2>/dev/null && kill -9 "${p#/proc/}" 2>/dev/null; done'
)
_REAPER = 'id="$1"; ' + _REAP_BODY + "; true"
"""Kills every process whose environment carries CLAWGYM_EXEC=$1."""
_WRAP = 'id="$1"; shift; "$@"; rc=$?; ' + _REAP_BODY + "; exit $rc"
"""Runs the command, then reaps whatever it left behind, keeping its exit code."""


def _client() -> Any:
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a core dependency
        raise SandboxStartError("docker backend: docker-py missing. Fix: pip install docker") from exc
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        raise SandboxStartError(
            f"docker backend: cannot reach dockerd ({exc}). Fix: `bash scripts/docker-up.sh` "
            "(starts dockerd and builds clawgym-base:latest), or use backend 'bwrap'."
        ) from exc
    return client


class DockerSandbox(Sandbox):
    """A docker container; see the module docstring."""

    name = "docker"

    def __init__(self, config: SandboxConfig) -> None:
        super().__init__(config)
        if config.user not in ("root", "user"):
            raise ConfigError(f"SandboxConfig.user: {config.user!r} is not one of ['root', 'user']")
        self.uid = 0 if config.user == "root" else 1000
        self.home = "/root" if self.uid == 0 else "/home/user"
        self.dir: Path | None = None
        self._client: Any = None
        self._container: Any = None
        self._cg_paths: dict[str, Path] = {}
        self._baseline: dict[str, int] = {}

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.state is not SandboxState.CREATED:
            raise SandboxStartError(f"docker sandbox: start() called in state {self.state.value}")
        await asyncio.to_thread(self._start_sync)
        self.state = SandboxState.STARTED
        if self.config.proxy_socket is not None:
            await self._start_forwarder()

    def _start_sync(self) -> None:
        cfg = self.config
        if cfg.workspace_src is not None and not Path(cfg.workspace_src).is_dir():
            raise ConfigError(f"SandboxConfig.workspace_src: {cfg.workspace_src} is not a folder")
        if cfg.proxy_socket is not None and not Path(cfg.proxy_socket).exists():
            raise ConfigError(f"SandboxConfig.proxy_socket: {cfg.proxy_socket} does not exist; start the proxy first")
        self._client = _client()
        image = cfg.image or DEFAULT_IMAGE
        try:
            self._client.images.get(image)
        except Exception as exc:
            raise SandboxStartError(
                f"docker backend: image {image!r} not found. Fix: `bash scripts/docker-up.sh` builds clawgym-base:latest"
            ) from exc
        self.dir = Path(tempfile.mkdtemp(prefix="clawgym-docker-"))
        ws = self.dir / "workspace"
        if cfg.workspace_src is not None:
            shutil.copytree(cfg.workspace_src, ws, symlinks=True)
        else:
            ws.mkdir()
        if self.uid != 0 and os.geteuid() == 0:
            for root, dirs, files in os.walk(ws):
                for n in [root, *(os.path.join(root, x) for x in dirs + files)]:
                    os.lchown(n, self.uid, self.uid)
        volumes = {str(ws): {"bind": cfg.workspace_mount, "mode": "rw"}}
        if cfg.proxy_socket is not None:
            volumes[str(cfg.proxy_socket)] = {"bind": _bridge.SOCKET_INSIDE, "mode": "ro"}
        for m in cfg.mounts:
            volumes[str(m.host)] = {"bind": m.inside, "mode": "rw" if m.writable else "ro"}
        limits: dict[str, Any] = {}
        if cfg.memory_mb:
            limits.update(mem_limit=f"{cfg.memory_mb}m", memswap_limit=f"{cfg.memory_mb}m")
        if cfg.pids:
            limits["pids_limit"] = cfg.pids
        if cfg.cpus:
            limits["nano_cpus"] = int(cfg.cpus * 1e9)
        try:
            self._container = self._client.containers.run(
                image, ["sleep", "infinity"], detach=True, init=True, network_mode="none",
                volumes=volumes, working_dir=cfg.workspace_mount, hostname="clawgym",
                labels={"clawgym.sandbox": "1"}, security_opt=["no-new-privileges"],
                cap_drop=["NET_RAW", "MKNOD", "AUDIT_WRITE", "SETFCAP", "SYS_CHROOT"], **limits,
            )  # fmt: skip
            if self.uid != 0:
                self._container.exec_run(["sh", "-c", "mkdir -p /home/user && chown 1000:1000 /home/user"])
            self._find_cgroup()
        except Exception as exc:
            self._cleanup_sync()
            raise SandboxStartError(f"docker backend: cannot start a container from {image!r}: {exc}") from exc

    def _find_cgroup(self) -> None:
        """Locate the container's cgroup on the host, to tell OOM and pids-limit kills apart."""
        self._container.reload()
        pid = self._container.attrs["State"]["Pid"]
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            return
        for line in lines:
            _, ctrls, path = line.split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                if c in ("memory", "pids"):
                    self._cg_paths[c] = Path("/sys/fs/cgroup", c, path.lstrip("/"))
                elif c == "":
                    base = Path("/sys/fs/cgroup") if Path("/sys/fs/cgroup/cgroup.controllers").exists() else Path(
                        "/sys/fs/cgroup/unified"
                    )
                    for k in ("memory", "pids"):
                        if (base / path.lstrip("/") / f"{k}.events").exists():
                            self._cg_paths.setdefault(k, base / path.lstrip("/"))
        self._baseline = self._counters()

    def _counters(self) -> dict[str, int]:
        memory = self._cg_paths.get("memory")
        v1 = memory is not None and (memory / "memory.oom_control").exists()
        return limit_counters(self._cg_paths, "memory.oom_control" if v1 else "memory.events")

    def _limit_hit(self) -> str | None:
        now = self._counters()
        hit = limit_fired(self._baseline, now)
        self._baseline = now
        return hit

    async def _start_forwarder(self) -> None:
        script = _bridge.prelude(self.config.proxy_port, use_socat=True)
        # Not through _exec_raw: its reaper would kill the forwarder when the script returns.
        r = await asyncio.to_thread(self._container.exec_run, [*script, "true"], user="0")
        if r.exit_code != 0:
            await self.close()
            raise SandboxStartError(f"docker backend: proxy forwarder failed: {r.output.decode(errors='replace')}")

    # ------------------------------------------------------------------ exec
    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        user = "root" if self.uid == 0 else "user"
        out = {"HOME": self.home, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
        out.update(self.config.env)
        out.update(env or {})
        return out

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
        """Run ``cmd`` with ``docker exec``; see ``Sandbox.exec``."""
        if not cmd:
            raise SandboxExecError("exec: empty command")
        argv = list(cmd)
        if stdin is not None:
            name = f"/tmp/.clawgym-stdin-{uuid.uuid4().hex[:8]}"
            await self._put_bytes(name, stdin)
            argv = ["sh", "-c", 'f="$1"; shift; exec "$@" < "$f"', "stdin", name, *argv]
        return await self._exec_raw(
            argv, env=env, cwd=cwd, timeout=timeout if timeout is not None else self.config.wall_time_s,
            on_output=on_output, max_output_bytes=max_output_bytes,
        )  # fmt: skip

    async def _exec_raw(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        max_output_bytes: int = 16 * 1024 * 1024,
        user: str | None = None,
    ) -> ExecResult:
        if self.state is not SandboxState.STARTED or self._container is None:
            raise SandboxExecError(f"docker sandbox: exec in state {self.state.value}; call start() first")
        exec_id = uuid.uuid4().hex[:12]
        full_env = {**self._env(env), "CLAWGYM_EXEC": exec_id}
        api = self._client.api
        t0 = time.perf_counter()
        try:
            handle = await asyncio.to_thread(
                api.exec_create, self._container.id, ["sh", "-c", _WRAP, "clawgym-exec", exec_id, *argv],
                environment=full_env, workdir=cwd or self.config.workspace_mount,
                user=user or f"{self.uid}:{self.uid}",
            )  # fmt: skip
        except Exception as exc:
            raise SandboxExecError(f"docker exec could not start {argv[0]!r}: {exc}") from exc
        out, err = OutputBuffer(max_output_bytes), OutputBuffer(max_output_bytes)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, bytes] | None] = asyncio.Queue()

        def pump() -> None:
            try:
                for o, e in api.exec_start(handle["Id"], stream=True, demux=True):
                    if o:
                        loop.call_soon_threadsafe(queue.put_nowait, ("stdout", o))
                    if e:
                        loop.call_soon_threadsafe(queue.put_nowait, ("stderr", e))
            except Exception as exc:  # the stream broke (e.g. container removed): say so in stderr
                note = f"\n[clawgym: docker output stream ended: {exc}]\n".encode()
                loop.call_soon_threadsafe(queue.put_nowait, ("stderr", note))
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, None)

        reader = loop.run_in_executor(None, pump)

        async def consume() -> None:
            while (item := await queue.get()) is not None:
                (out if item[0] == "stdout" else err).add(item[1])
                if on_output is not None:
                    res = on_output(*item)
                    if asyncio.iscoroutine(res):
                        await res

        consumer = asyncio.ensure_future(consume())
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(consumer), timeout)
        except TimeoutError:
            timed_out = True
            await self._reap(exec_id)
            try:
                await asyncio.wait_for(asyncio.shield(consumer), 5)
            except TimeoutError:
                consumer.cancel()
        except BaseException:
            await self._reap(exec_id)
            raise
        if not timed_out:
            await reader
        info = await asyncio.to_thread(api.exec_inspect, handle["Id"])
        code = info.get("ExitCode")
        limit = "wall_time" if timed_out else await asyncio.to_thread(self._limit_hit)
        return ExecResult(
            return_code=-9 if timed_out or code is None else int(code),
            stdout=out.text(), stderr=err.text(), duration_s=time.perf_counter() - t0,
            timed_out=timed_out, killed_by_limit=limit,
        )  # fmt: skip

    async def _reap(self, exec_id: str) -> None:
        """SIGKILL every process that carries ``exec_id`` in its environment."""
        if self._container is None:
            return
        await asyncio.to_thread(self._container.exec_run, ["sh", "-c", _REAPER, "reaper", exec_id], user="0")

    # ------------------------------------------------------------------ files
    def _check_target(self, path: str) -> None:
        top = path.split("/")[1] if path.count("/") else ""
        if not top or top in _RESERVED_TOP:
            raise SandboxExecError(
                f"{path} is not writable in the sandbox; copy into the workspace "
                f"({self.config.workspace_mount}), {self.home}, /tmp, or a new top-level folder such as /verifier"
            )

    async def _put_bytes(self, path: str, data: bytes) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(posixpath.basename(path))
            info.size, info.uid, info.gid, info.mode = len(data), self.uid, self.uid, 0o600
            tar.addfile(info, io.BytesIO(data))
        await asyncio.to_thread(self._container.put_archive, posixpath.dirname(path), buf.getvalue())

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
        try:
            await asyncio.to_thread(self._container.put_archive, parent, data)
        except Exception as exc:
            raise SandboxExecError(f"upload {src} -> {target} failed: {exc}") from exc

    async def download(self, src: str, dest: Path) -> None:
        """Copy ``src`` out (``get_archive``); symlinks leading outside it are dropped."""
        source = inside_path(src, self.config.workspace_mount)
        assert self.dir is not None
        out = Path(tempfile.mkdtemp(dir=self.dir, prefix="out-"))

        def fetch() -> Path:
            try:
                stream, _ = self._container.get_archive(source)
            except Exception as exc:
                raise SandboxExecError(f"download {source}: {exc}") from exc
            tar_path = out / "a.tar"
            with open(tar_path, "wb") as f:
                f.writelines(stream)
            with tarfile.open(tar_path) as tar:
                members = tar.getmembers()
                tar.extractall(out / "x", members=members, filter=_safe_filter)
            return out / "x" / (members[0].name.split("/")[0] if members else posixpath.basename(source))

        try:
            top = await asyncio.to_thread(fetch)
            strip_escaping_symlinks(top)
            await asyncio.to_thread(move_into, top, Path(dest))
        finally:
            rmtree_hard(out)

    # ------------------------------------------------------------------ close
    async def close(self) -> None:
        """Remove the container (killing everything in it) and the host copy; idempotent."""
        if self.state is SandboxState.CLOSED:
            return
        self.state = SandboxState.CLOSED
        await asyncio.to_thread(self._cleanup_sync)

    def _cleanup_sync(self) -> None:
        if self._container is not None:
            try:
                self._container.remove(force=True)
            except Exception:
                pass
            self._container = None
        if self.dir is not None:
            rmtree_hard(self.dir)
            self.dir = None


def _safe_filter(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    """tarfile's "data" filter, but links pointing out are skipped instead of failing the copy."""
    try:
        return tarfile.data_filter(member, path)
    except tarfile.FilterError:
        if member.issym() or member.islnk():
            return None
        raise
