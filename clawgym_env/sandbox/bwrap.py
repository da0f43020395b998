"""The default backend: bubblewrap namespaces over a copy-on-write workspace.

Each ``exec`` is a fresh ``bwrap`` over the same per-sandbox host folders, so state persists
between calls without a long-lived process to enter (entering namespaces with setns would need
privileges an unprivileged user lacks; a fresh bwrap measured 6.4 ms median on an idle core). Its
command line and environment are built in ``_bwrap_argv``, files go in and out through ``_bwrap_files``,
and the host-side setup shared by all sandboxes (the binary and its probe, /etc, system binds, where
folders live) is ``_bwrap_host``:

    <sandbox_root()>/clawgym-bwrap-XXXX/     (/dev/shm when roomy, else the temp dir; as root a tmpfs of its
                                             own: ``max_files`` inodes, ``disk_mb``, see ``_tmpfs``)
        upper/, work-<id>/   overlay upper layer and per-exec work dirs (workspace changes)
        final/               a lower layer, empty until ``final_layers`` moves upper/'s entries in: a
                             grading sandbox may stack it before the agent is done (``spawn``)
        empty/               overlay lower layer when the task has no workspace_src
        home/  tmp/          HOME and /tmp inside (private, persistent across exec calls)
        extra/<name>/        top-level folders created by ``upload`` (e.g. /verifier)

Isolation: new user, pid, ipc, uts, mount, cgroup and network namespaces (loopback only), all
capabilities dropped, ``--die-with-parent``, ``--new-session``. A sealed (grading) sandbox also
refuses the ptrace family of syscalls (``_seccomp``), runs as "user", and carries the bwrap binary
for the graders' agent-code jail (``CLAWGYM_JAIL``: a nested bwrap that cannot see the config
mounts, /tmp, HOME or any process of the grader; see ``clawgym_env.grading._agent_jail``). Only system folders are bound,
read-only; the host root, /home, /root and /tmp are not. The only way out is the proxy socket
(see ``_bridge``: where this process may, it listens inside the exec's network namespace itself, so
nothing is started inside for it; ``_bwrap_hold``). Killing the outer bwrap kills the namespace's init, and with it every
process inside, including ones that ignore SIGTERM or double-fork.

Limits: memory, pids and cpu through a per-sandbox cgroup where one is writable (``_cgroup``; a
sandbox's first exec is started by a spare launcher already inside, ``_bwrap_spare``, and every
other exec's namespace init is moved in while bwrap holds it before its command, ``_bwrap_hold``);
otherwise pids falls back to RLIMIT_NPROC via ``prlimit`` (effective for non-root host users
only: the kernel exempts host root), and memory/cpu are not enforced (``clawgym sandbox doctor``
says so). Wall-clock limits always apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import shutil
import signal
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from clawgym_env.errors import ConfigError, SandboxExecError, SandboxStartError
from clawgym_env.sandbox import _bridge
from clawgym_env.sandbox._bwrap_argv import (
    UIDS,
    check_config,
    exec_argv,
    exit_127,
    sandbox_env,
    static_args,
)
from clawgym_env.sandbox._bwrap_files import BwrapFiles
from clawgym_env.sandbox._bwrap_hold import HeldExec, start_held
from clawgym_env.sandbox._bwrap_host import (
    BwrapProbe,
    find_bwrap,
    probe_bwrap,
    sandbox_root,
    sweep_once,
)
from clawgym_env.sandbox._bwrap_spare import Spare, replenish
from clawgym_env.sandbox._bwrap_spare import take as take_spare
from clawgym_env.sandbox._cgroup import SandboxCgroup, controllers_for, detect
from clawgym_env.sandbox._fs import (
    entries_at_most,
    rmtree_hard,
    sanitize_tree,
    strip_escaping_symlinks,
)
from clawgym_env.sandbox._process import ChildProcess, Running, SpawnedProcess, adopt, start_process
from clawgym_env.sandbox._seccomp import bpf_program
from clawgym_env.sandbox._sweep import owner_tag
from clawgym_env.sandbox._tmpfs import mount_tmpfs, unmount
from clawgym_env.sandbox.base import (
    ExecResult,
    FinalLayers,
    OutputCallback,
    SandboxConfig,
    SandboxState,
    Spawned,
)

__all__ = ["BwrapProbe", "BwrapSandbox", "find_bwrap", "probe_bwrap", "sandbox_root"]


class BwrapSandbox(BwrapFiles):
    """A bubblewrap sandbox; see the module docstring for its layout and guarantees."""

    name = "bwrap"

    def __init__(self, config: SandboxConfig) -> None:
        super().__init__(config)
        if config.user not in UIDS:
            raise ConfigError(f"SandboxConfig.user: {config.user!r} is not one of {sorted(UIDS)}")
        # sealed: the grader must be unprivileged in its namespace for the nested jail (bwrap as uid 0 takes the setuid path)
        self.uid = UIDS["user"] if config.sealed else UIDS[config.user]
        self.home = "/root" if self.uid == 0 else "/home/user"
        self.dir: Path | None = None
        self._bwrap = ""
        self._base: list[str] = []
        self._extra: dict[str, Path] = {}
        self._procs: set[ChildProcess] = set()
        self._cg: SandboxCgroup | None = None
        self._spare: Spare | None = None
        """A launcher already in ``_cg`` for the first exec there (``_bwrap_spare``)."""
        self._bridge_kind = "socat"
        """How an exec's proxy port is served: "host", "socat" or "python" (``_bridge``)."""
        self._overlay = True
        self._pristine = True
        self.file_limit = False
        """Whether the sandbox's folders are a tmpfs of their own, holding at most ``config.max_files`` (``_tmpfs``)."""

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.state is not SandboxState.CREATED:
            raise SandboxStartError(f"bwrap sandbox: start() called in state {self.state.value}")
        probe = probe_bwrap()
        if not probe.ok:
            raise SandboxStartError(
                f"bwrap backend cannot create namespaces here: {probe.detail}. Fix: allow unprivileged user "
                "namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                "kernel.apparmor_restrict_unprivileged_userns=0) or use backend 'docker'. "
                "Run `clawgym sandbox doctor` for details."
            )
        self._bwrap, self._overlay = probe.binary, probe.overlay
        cfg = self.config
        check_config(cfg, self._overlay)
        root = sandbox_root()
        sweep_once(root)
        self.dir = Path(tempfile.mkdtemp(prefix=f"clawgym-bwrap-{owner_tag()}-", dir=root))
        try:
            self.file_limit = mount_tmpfs(self.dir, max_files=cfg.max_files, size_mb=cfg.disk_mb)
            for sub in ("upper", "final", "empty", "home", "tmp", "extra"):
                (self.dir / sub).mkdir()
            os.chmod(self.dir / "tmp", 0o1777)
            if cfg.sealed:
                program = bpf_program()
                if not program:
                    raise SandboxStartError(f"bwrap: no seccomp table for {platform.machine()}; cannot seal a grading sandbox")
                (self.dir / "seccomp.bpf").write_bytes(program)
            if not self._overlay and cfg.workspace_src is not None:  # old bwrap: copy instead
                shutil.copytree(cfg.workspace_src, self.dir / "upper", symlinks=True, dirs_exist_ok=True)
            info = detect()
            wanted = controllers_for(info, cfg.memory_mb, cfg.pids, cfg.cpus) if info is not None else frozenset()
            if info is not None and wanted and (cfg.memory_mb or cfg.pids or cfg.cpus):
                self._spare = take_spare(wanted)
                self._cg = self._spare.cgroup if self._spare is not None else SandboxCgroup.unlimited(info, wanted)
                self._cg.limit(cfg.memory_mb, cfg.pids, cfg.cpus)
            self._bridge_kind = _bridge.choose(probe.netns, cfg.rootfs is not None)
            self._base = static_args(cfg, self.uid, self.home, self.dir, self._bwrap)
        except BaseException:
            self._cleanup()
            raise
        self.state = SandboxState.STARTED

    # ------------------------------------------------------------------ exec
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
        """Run ``cmd`` in a fresh bwrap over this sandbox's folders; see ``Sandbox.exec``."""
        if not cmd:
            raise SandboxExecError("exec: empty command")
        return await self._run(
            cmd, env=env, cwd=cwd, timeout=timeout, stdin=stdin, on_output=on_output,
            max_output_bytes=max_output_bytes, binds=(), proxy=self.config.proxy_socket is not None,
        )  # fmt: skip

    async def spawn(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        on_output: OutputCallback | None = None,
        max_output_bytes: int = 16 * 1024 * 1024,
    ) -> Spawned:
        """Start ``cmd`` now in a fresh bwrap, blocked on its stdin until ``finish`` (see ``Sandbox.spawn``);
        it returns once the command itself runs (behind the proxy bridge: once its listener is up).

        Its mounts are made now: over the workspace it sees ``final/``, which holds nothing of the agent's
        until ``final_layers`` moves it in, so a grader spawned while the agent runs reads its final workspace
        only if it reads after being given its input."""
        if not cmd:
            raise SandboxExecError("spawn: empty command")
        return await self._start(
            cmd,
            env=env,
            cwd=cwd,
            with_stdin=True,
            on_output=on_output,
            max_output_bytes=max_output_bytes,
            binds=(),
            proxy=self.config.proxy_socket is not None,
        )

    async def _run(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None,
        cwd: str | None,
        timeout: float | None,
        stdin: bytes | None,
        on_output: OutputCallback | None,
        max_output_bytes: int,
        binds: Sequence[str],
        proxy: bool,
        cgroup: bool = True,
    ) -> ExecResult:
        started = await self._start(
            cmd,
            env=env,
            cwd=cwd,
            with_stdin=stdin is not None,
            on_output=on_output,
            max_output_bytes=max_output_bytes,
            binds=binds,
            proxy=proxy,
            cgroup=cgroup,
        )
        return await started.finish(stdin, timeout)

    async def _start(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None,
        cwd: str | None,
        with_stdin: bool,
        on_output: OutputCallback | None,
        max_output_bytes: int,
        binds: Sequence[str],
        proxy: bool,
        cgroup: bool = True,
    ) -> SpawnedProcess:
        if self.state is not SandboxState.STARTED or self.dir is None:
            raise SandboxExecError(f"bwrap sandbox: exec in state {self.state.value}; call start() first")
        self._pristine = False
        workdir = self.dir / f"work-{uuid.uuid4().hex[:10]}"
        if self._overlay:
            workdir.mkdir()
        run_env = sandbox_env(self.config, self.uid, self.home, self._bwrap, env)
        bridge = self._bridge_kind if proxy else None
        if bridge == "python":
            run_env.update(_bridge.prelude_env(False))
        cg = self._cg if cgroup else None

        async def classify() -> str | None:
            return cg.limit_hit() if cg is not None else None

        listen = (self.config.proxy_port, self.config.proxy_socket) if bridge == "host" and self.config.proxy_socket is not None else None
        wanted = lambda: self.state is SandboxState.STARTED  # noqa: E731
        spare = self._spare if cg is not None and Spare.serves([self._bwrap, *cmd], run_env) else None
        if spare is not None:  # already in the cgroup: held for the listener, if any, and until bwrap runs
            self._spare = None
            host: HeldExec | None = HeldExec(None, listen, wanted, pipes=spare.hold_pipes())
        else:
            host = HeldExec(cg, listen, wanted) if cg is not None or listen is not None else None
        fds: list[int] = []
        try:
            fd_args: list[str] = []
            if self.config.sealed and spare is not None:  # the launcher opens the filter there for bwrap
                fd_args += ["--seccomp", str(spare.seccomp_fd)]
            elif self.config.sealed:  # bwrap reads the filter from this descriptor at start
                fds.append(os.open(self.dir / "seccomp.bpf", os.O_RDONLY))
                fd_args += ["--seccomp", str(fds[0])]
            if host is not None:
                fd_args += host.bwrap_args()
            argv = exec_argv(
                self.config,
                cmd,
                bwrap=self._bwrap,
                base=self._base,
                d=self.dir,
                overlay=self._overlay,
                extra=self._extra,
                workdir=workdir,
                cwd=cwd,
                binds=binds,
                bridge=bridge,
                fd_args=fd_args,
                cgrouped=cg is not None,
            )
            if spare is not None:
                start = self._from_spare(spare, argv, run_env, with_stdin, on_output, max_output_bytes, classify)
            else:
                start = start_process(
                    argv,
                    env=run_env,
                    cwd=None,
                    with_stdin=with_stdin,
                    on_output=on_output,
                    max_output_bytes=max_output_bytes,
                    kill=self._kill,
                    on_start=self._procs.add,
                    classify=classify,
                    pass_fds=[*fds, *(host.child_fds() if host is not None else ())],
                )
            running = await (start if host is None else start_held(start))
        except BaseException:
            if host is not None:
                host.close()
            if spare is not None:
                spare.kill()
            raise
        finally:  # the child has its own copy from the fork
            for fd in fds:
                os.close(fd)
        if host is None:
            return SpawnedProcess(running, self._release, self.config.wall_time_s, exit_127)
        try:
            await host.open(running)  # the command starts once it is in the cgroup and its listener is up
        except BaseException:
            self._release()
            raise
        if cg is not None:
            replenish(cg.info, frozenset(cg.dirs))  # the spares for later sandboxes, made while this one runs

        def ended() -> None:
            self._release()
            host.close()

        return SpawnedProcess(running, ended, self.config.wall_time_s, exit_127)

    async def _from_spare(
        self,
        spare: Spare,
        argv: list[str],
        env: dict[str, str],
        with_stdin: bool,
        on_output: OutputCallback | None,
        max_output_bytes: int,
        classify: Callable[[], Awaitable[str | None]],
    ) -> Running:
        """``argv`` started by ``spare``, the launcher already in this sandbox's cgroup (``_bwrap_spare``)."""
        assert self.dir is not None
        proc = await spare.launch(argv, env, with_stdin=with_stdin, seccomp=self.dir / "seccomp.bpf" if self.config.sealed else None)
        return adopt(
            proc,
            with_stdin=with_stdin,
            on_output=on_output,
            max_output_bytes=max_output_bytes,
            kill=self._kill,
            on_start=self._procs.add,
            classify=classify,
        )

    async def _run_io(self, cmd: Sequence[str], binds: Sequence[str]) -> ExecResult:
        """Outside the sandbox's cgroup: workspace files are tmpfs pages charged to it, so an agent that
        filled its memory limit with them got every later process there killed, the copy of its final
        workspace too (an error, left out of training). These commands are ours alone (own pid namespace)."""
        return await self._run(
            cmd, env=None, cwd="/", timeout=600, stdin=None, on_output=None, max_output_bytes=65536, binds=binds, proxy=False, cgroup=False
        )

    def _release(self) -> None:
        """An exec is over: forget its process (its empty overlay work dir goes with ``close``)."""
        self._procs = {p for p in self._procs if p.returncode is None}

    @staticmethod
    def _kill(proc: ChildProcess) -> None:
        # The outer bwrap's death SIGKILLs the namespace init (--die-with-parent), which takes
        # every process in the pid namespace with it.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    async def reap(self) -> None:
        """Kill every running exec; with it goes its whole pid namespace (double forks, setsid, all)."""
        procs = list(self._procs)
        for p in procs:
            self._kill(p)
        for p in procs:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(p.wait(), 5)
        # The outer bwrap's death kills the namespace's processes a moment later (a signal, not a wait):
        # with a cgroup, wait until none is left, so nothing writes the workspace once reap returns.
        if self._cg is not None and self._cg.pids_inside():
            await asyncio.to_thread(self._cg.kill_all)

    def layers_ahead(self) -> FinalLayers | None:
        """What ``final_layers`` will return (less ``skipped``), for a grading sandbox started early."""
        if not self._overlay or self.dir is None:
            return None
        return FinalLayers(self.config.workspace_src, (*self.config.workspace_layers, self.dir / "final"))

    async def final_layers(self) -> FinalLayers | None:
        """The overlay layers themselves, which saves the copy-out exec of a download: the upper layer is
        cleaned in place (it is only ours), then its entries are moved into ``final/``, the lower layer a
        grading sandbox stacks (and this sandbox's later execs too, under a now empty upper layer). A
        second call after more writes returns None: download instead."""
        if not self._overlay or self.dir is None or self._procs:
            return None
        upper, final = self.dir / "upper", self.dir / "final"

        def clean_and_move() -> list[str] | None:
            strip_escaping_symlinks(upper)
            skipped = sanitize_tree(upper, keep_whiteouts=True)
            entries = os.listdir(upper)
            if entries and os.listdir(final):
                return None
            for name in entries:
                os.rename(upper / name, final / name)
            return skipped

        skipped = clean_and_move() if entries_at_most(upper) else await asyncio.to_thread(clean_and_move)
        if skipped is None:
            return None
        return FinalLayers(self.config.workspace_src, (*self.config.workspace_layers, final), tuple(skipped))

    # ------------------------------------------------------------------ close
    async def close(self) -> None:
        """Kill every process, remove the cgroup and every host folder; idempotent."""
        if self.state is SandboxState.CLOSED:
            return
        self.state = SandboxState.CLOSED
        for p in list(self._procs):
            self._kill(p)
        for p in list(self._procs):
            try:
                await asyncio.wait_for(p.wait(), 5)
            except TimeoutError:
                pass
        self._procs.clear()
        if not self._cleanup_now():
            await asyncio.to_thread(self._cleanup)

    def _cleanup_now(self) -> bool:
        """``_cleanup`` on the event loop, done when it is quick: no spare to kill, nothing left in the cgroup,
        a small folder tree (else False, and ``_cleanup`` does the rest in a thread)."""
        if self._spare is not None or (self.dir is not None and not entries_at_most(self.dir)):
            return False
        if self._cg is not None:
            if not self._cg.remove_now():
                return False
            self._cg = None
        self._remove_dir()
        return True

    def _remove_dir(self) -> None:
        if self.dir is not None:
            if self.file_limit:  # the agent's files go with the tmpfs, in the kernel: one call however many
                unmount(self.dir)
            rmtree_hard(self.dir)
            self.dir = None

    def _cleanup(self) -> None:
        if self._spare is not None:  # never used: killed here, its cgroup (ours) removed next
            self._spare.kill()
            self._spare = None
        if self._cg is not None:
            self._cg.destroy()
            self._cg = None
        self._remove_dir()
