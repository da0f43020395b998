"""The docker backend (docker-py): one container per sandbox, one ``docker exec`` per process.

The container runs the base image (``clawgym-base:latest``, built by ``scripts/docker-up.sh``)
with ``network_mode="none"``, HostConfig limits (memory, pids, cpus), docker's init as pid 1,
and the workspace as a bind-mounted host copy of ``workspace_src``. The proxy socket is
bind-mounted at ``/run/clawgym/proxy.sock`` and a socat forwarder, started once with the
container, listens on ``127.0.0.1:proxy_port`` inside.

A container per sandbox with exec per process was chosen over a container per process:
measured with bench/sandbox.py on the 2-core dev box (load ~11), an exec took 142 ms median
against 868 ms to create and remove a container, and uploads to /verifier persist without
extra volumes. When the last running exec ends (or times out), every process of the container
cgroup that is not the container's own (init, sleep, the forwarder) is killed from the host, so
stragglers die with their exec as in the bwrap backend, whatever they did to hide (setsid,
``env -i``). ``close`` removes the container.

Disk: the root filesystem is read-only; the workspace is a tmpfs on the host and /tmp, /var/tmp,
/run and HOME are tmpfs mounts, each limited in size (``SandboxConfig.disk_mb``) and file count
(``max_files``), so nothing written inside lands on the host disk. Folders and containers carry
their owner's tag: what a killed run left goes at the next one's first sandbox (``_docker_procs``). A sealed (grading)
container runs under the
``_seccomp`` profile; its grader is root with only the capabilities the agent-code jail needs
(``CLAWGYM_JAIL``: agent code runs as uid 1000, without capabilities), and its config mounts (the
grader's hidden files, payload) are copies only root may read (0700).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError, SandboxExecError, SandboxStartError
from clawgym_env.sandbox import _bridge
from clawgym_env.sandbox._cgroup import limit_counters, limit_fired
from clawgym_env.sandbox._docker_files import RO_TMPFS, DockerFiles
from clawgym_env.sandbox._docker_procs import OWNER_LABEL, REAPER, WRAP, host_reap, sweep_docker
from clawgym_env.sandbox._fs import rmtree_hard
from clawgym_env.sandbox._process import OutputBuffer
from clawgym_env.sandbox._sweep import owner_tag
from clawgym_env.sandbox._tmpfs import mount_tmpfs, unmount
from clawgym_env.sandbox.base import AGENT_UID, JAIL_ENV, ExecResult, OutputCallback, SandboxConfig, SandboxState

__all__ = ["DEFAULT_IMAGE", "DockerSandbox"]

DEFAULT_IMAGE = "clawgym-base:latest"
_BATCH = 65536
"""Bytes of a stream handed to the event loop at once (the bwrap backend reads its pipes in 64 KiB too)."""


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


class DockerSandbox(DockerFiles):
    """A docker container; see the module docstring."""

    name = "docker"

    def __init__(self, config: SandboxConfig) -> None:
        super().__init__(config)
        if config.user not in ("root", "user"):
            raise ConfigError(f"SandboxConfig.user: {config.user!r} is not one of ['root', 'user']")
        self.uid = 0 if config.user == "root" or config.sealed else AGENT_UID
        self.home = "/root" if self.uid == 0 else "/home/user"
        self.dir: Path | None = None
        self._client: Any = None
        self._container: Any = None
        self._cg_paths: dict[str, Path] = {}
        self._baseline: dict[str, int] = {}
        self._tmpfs: Path | None = None
        self._reaped = False
        self._own = ""
        """Pids (inside) of the container's own processes (init, sleep, forwarder): never reaped."""

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.state is not SandboxState.CREATED:
            raise SandboxStartError(f"docker sandbox: start() called in state {self.state.value}")
        await asyncio.to_thread(self._start_sync)
        self.state = SandboxState.STARTED
        if self.config.proxy_socket is not None:
            await self._start_forwarder()
        try:
            r = await asyncio.to_thread(self._container.exec_run, ["sh", "-c", 'echo /proc/[0-9]*; echo "$$"'], user="0")
        except Exception as exc:
            await self.close()
            raise SandboxStartError(f"docker backend: cannot list the container's processes: {exc}") from exc
        listed, me = r.output.decode().split("\n")[:2]
        self._own = " ".join(p.rsplit("/", 1)[1] for p in listed.split() if p.rsplit("/", 1)[1] != me.strip())

    def _start_sync(self) -> None:
        cfg = self.config
        if cfg.workspace_src is not None and not Path(cfg.workspace_src).is_dir():
            raise ConfigError(f"SandboxConfig.workspace_src: {cfg.workspace_src} is not a folder")
        if cfg.workspace_layers:
            raise ConfigError("SandboxConfig.workspace_layers: bwrap only; on docker pass one workspace_src")
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
        sweep_docker(self._client)
        self.dir = Path(tempfile.mkdtemp(prefix=f"clawgym-docker-{owner_tag()}-"))
        ws = self.dir / "workspace"
        ws.mkdir()
        self._mount_tmpfs(ws)
        if cfg.workspace_src is not None:
            shutil.copytree(cfg.workspace_src, ws, symlinks=True, dirs_exist_ok=True)
        if self.uid != 0 and os.geteuid() == 0:
            for root, dirs, files in os.walk(ws):
                for n in [root, *(os.path.join(root, x) for x in dirs + files)]:
                    os.lchown(n, self.uid, self.uid)
        volumes = {str(ws): {"bind": cfg.workspace_mount, "mode": "rw"}}
        if cfg.proxy_socket is not None:
            volumes[str(cfg.proxy_socket)] = {"bind": _bridge.SOCKET_INSIDE, "mode": "ro"}
        for i, m in enumerate(cfg.mounts):
            host = self._private_copy(Path(m.host), i) if cfg.sealed else Path(m.host)
            volumes[str(host)] = {"bind": m.inside, "mode": "rw" if m.writable else "ro"}
        limits: dict[str, Any] = {}
        if cfg.memory_mb:
            limits.update(mem_limit=f"{cfg.memory_mb}m", memswap_limit=f"{cfg.memory_mb}m")
        if cfg.pids:
            limits["pids_limit"] = cfg.pids
        if cfg.cpus:
            limits["nano_cpus"] = int(cfg.cpus * 1e9)
        size = (f",size={cfg.disk_mb}m" if cfg.disk_mb else "") + (f",nr_inodes={cfg.max_files}" if cfg.max_files else "")
        tmpfs = {d: f"rw,nosuid,nodev,mode=1777{size}" for d in RO_TMPFS}
        tmpfs[self.home] = f"rw,nosuid,nodev,mode=0755{size}"
        security = ["no-new-privileges"]
        caps = ["NET_RAW", "MKNOD", "AUDIT_WRITE", "SETFCAP", "SYS_CHROOT"]
        if cfg.sealed:
            from clawgym_env.sandbox._seccomp import docker_profile

            security.append(f"seccomp={docker_profile()}")
            caps = ["ALL"]
            # the jail's, dropped by its setuid; init and sleep run as root (docker grants a root exec
            # these only when the container's user is root), out of reach of agent code (uid 1000)
            limits["cap_add"] = ["SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "FOWNER"]
        try:
            self._container = self._client.containers.run(
                image, ["sleep", "infinity"], detach=True, init=True, network_mode="none",
                volumes=volumes, working_dir=cfg.workspace_mount, hostname="clawgym",
                labels={"clawgym.sandbox": "1", OWNER_LABEL: owner_tag()}, security_opt=security, cap_drop=caps,
                read_only=True, tmpfs=tmpfs, **limits,
            )  # fmt: skip
            if self.uid != 0:
                self._container.exec_run(["sh", "-c", "mkdir -p /home/user && chown 1000:1000 /home/user"])
            self._find_cgroup()
        except Exception as exc:
            self._cleanup_sync()
            raise SandboxStartError(f"docker backend: cannot start a container from {image!r}: {exc}") from exc

    def _private_copy(self, src: Path, i: int) -> Path:
        """A copy of a sealed sandbox's mount that only root may read (agent code runs as AGENT_UID)."""
        assert self.dir is not None
        dest = self.dir / f"private-{i}"
        if src.is_dir():
            shutil.copytree(src, dest, symlinks=True)
        else:
            shutil.copy2(src, dest)
        os.chmod(dest, 0o700 if src.is_dir() else 0o600)
        return dest

    def _mount_tmpfs(self, folder: Path) -> None:
        """Put a tmpfs limited in size and file count on ``folder`` (needs host root, as dockerd itself does)."""
        cfg = self.config
        if not (cfg.disk_mb or cfg.max_files):
            return
        try:
            mounted = mount_tmpfs(folder, max_files=cfg.max_files, size_mb=cfg.disk_mb, mode=0o755)
        except OSError as exc:
            mounted, why = False, str(exc)
        else:
            why = "not permitted"
        if not mounted:
            raise SandboxStartError(
                f"docker backend: cannot mount a tmpfs of {cfg.disk_mb} MB and {cfg.max_files} files for the workspace "
                f"({why}); run as root, or set SandboxConfig.disk_mb=None and max_files=None to accept a workspace "
                "without these limits"
            )
        self._tmpfs = folder

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
                    base = Path("/sys/fs/cgroup") if Path("/sys/fs/cgroup/cgroup.controllers").exists() else Path("/sys/fs/cgroup/unified")
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
        if self.config.sealed:
            out[JAIL_ENV] = json.dumps({"kind": "uid", "uid": AGENT_UID, "hide": [m.inside for m in self.config.mounts]})
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
        self._reaped = False
        return await self._exec_raw(
            list(cmd), env=env, cwd=cwd, timeout=timeout if timeout is not None else self.config.wall_time_s,
            on_output=on_output, max_output_bytes=max_output_bytes, stdin=stdin,
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
        stdin: bytes | None = None,
    ) -> ExecResult:
        if self.state is not SandboxState.STARTED or self._container is None:
            raise SandboxExecError(f"docker sandbox: exec in state {self.state.value}; call start() first")
        full_env = self._env(env)
        api = self._client.api
        t0 = time.perf_counter()
        try:
            handle = await asyncio.to_thread(
                api.exec_create, self._container.id, ["sh", "-c", WRAP, "clawgym-exec", self._own, *argv],
                environment=full_env, workdir=cwd or self.config.workspace_mount,
                user=user or f"{self.uid}:{self.uid}", stdin=stdin is not None,
            )  # fmt: skip
        except Exception as exc:
            raise SandboxExecError(f"docker exec could not start {argv[0]!r}: {exc}") from exc
        out, err = OutputBuffer(max_output_bytes), OutputBuffer(max_output_bytes)
        loop = asyncio.get_running_loop()
        unread: list[int] = []
        """One entry per item handed to the loop and not yet taken."""
        queue: asyncio.Queue[tuple[str, bytes] | None] = asyncio.Queue()

        def frames() -> Iterator[tuple[bytes | None, bytes | None]]:
            if stdin is None:
                yield from api.exec_start(handle["Id"], stream=True, demux=True)
                return
            from docker.utils.socket import STDOUT, frames_iter

            # stdin goes over the attached socket: never through a file another process could read
            sock = api.exec_start(handle["Id"], socket=True)
            raw = getattr(sock, "_sock", sock)
            try:
                raw.sendall(stdin)
                raw.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            for kind, data in frames_iter(sock, tty=False):
                yield (data, None) if kind == STDOUT else (None, data)

        def pump() -> None:
            # docker sends what each write() wrote as a frame of its own: a process printing line by line sends
            # millions. Frames wait here while the loop has not taken the last item (or until _BATCH bytes), so the
            # event loop other sandboxes share gets an item per _BATCH bytes under a flood, each frame otherwise
            pending = {"stdout": bytearray(), "stderr": bytearray()}

            def hand_over(name: str, at_least: int) -> None:
                if pending[name] and (len(pending[name]) >= at_least or not unread):
                    unread.append(1)
                    loop.call_soon_threadsafe(queue.put_nowait, (name, bytes(pending[name])))
                    pending[name].clear()

            try:
                for o, e in frames():
                    for name, data in (("stdout", o), ("stderr", e)):
                        if data:
                            pending[name] += data
                            hand_over(name, _BATCH)
            except Exception as exc:  # noqa: BLE001 - the stream broke (e.g. container removed): say so in stderr
                pending["stderr"] += f"\n[clawgym: docker output stream ended: {exc}]\n".encode()
            finally:
                hand_over("stdout", 1)
                hand_over("stderr", 1)
                loop.call_soon_threadsafe(queue.put_nowait, None)

        reader = loop.run_in_executor(None, pump)

        async def consume() -> None:
            while (item := await queue.get()) is not None:
                with contextlib.suppress(IndexError):
                    unread.pop()
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
            await self.reap()
            try:
                await asyncio.wait_for(asyncio.shield(consumer), 5)
            except TimeoutError:
                consumer.cancel()
        except BaseException:
            await self.reap()
            raise
        if not timed_out:
            await reader
        try:
            info = await asyncio.to_thread(api.exec_inspect, handle["Id"])
        except Exception as exc:
            raise SandboxExecError(f"docker exec of {argv[0]!r}: cannot read its exit code: {exc}") from exc
        code = info.get("ExitCode")
        limit = "wall_time" if timed_out else await asyncio.to_thread(self._limit_hit)
        return ExecResult(
            return_code=-9 if timed_out or code is None else int(code),
            stdout=out.text(), stderr=err.text(), duration_s=time.perf_counter() - t0,
            timed_out=timed_out, killed_by_limit=limit,
        )  # fmt: skip

    async def reap(self) -> None:
        """SIGKILL every process of the container but its own (by pid namespace, not by marker) and wait
        until they are gone. From the host, through the container's cgroup, where it is known: an agent can
        fill its memory limit with workspace files (tmpfs), and then a reaper run inside is killed itself.
        A container that has stopped (even its init killed) has nothing left to reap."""
        if self._container is None:
            return
        cg = self._cg_paths.get("pids") or self._cg_paths.get("memory")
        done = None if cg is None else await asyncio.to_thread(host_reap, cg, set(self._own.split()), self._stopped)
        if done is None:
            try:
                r = await asyncio.to_thread(self._container.exec_run, ["sh", "-c", REAPER, "reaper", self._own], user="0")
                done = r.exit_code == 0
            except Exception as exc:
                if not await asyncio.to_thread(self._stopped):
                    raise SandboxExecError(f"docker sandbox: cannot reap its processes: {exc}") from exc
                done = True
        self._reaped = done

    def _stopped(self) -> bool:
        try:
            self._container.reload()
        except Exception:  # noqa: BLE001 - dockerd failed: say nothing about the container
            return False
        return bool(self._container.status in ("exited", "dead"))

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
            except Exception:  # noqa: BLE001 - best effort: the container may already be gone
                pass
            self._container = None
        if self._tmpfs is not None:
            unmount(self._tmpfs)
            self._tmpfs = None
        if self.dir is not None:
            rmtree_hard(self.dir)
            self.dir = None
