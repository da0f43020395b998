"""The command line and environment of one bwrap exec (``bwrap`` holds the sandbox and its lifecycle).

Every exec is a fresh ``bwrap``: the per-sandbox part that never changes (namespaces, system binds,
/etc, HOME, /tmp, the proxy socket, the graders' jail binary) is built once at start
(``static_args``); ``exec_argv`` adds the workspace overlay, upload folders, config mounts and the
command, behind the proxy bridge's prelude, under RLIMIT_NPROC where there is no cgroup (with one,
``_bwrap_hold`` moves the exec's namespace init in before the command starts).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from clawgym_env.errors import ConfigError
from clawgym_env.sandbox import _bridge
from clawgym_env.sandbox._bwrap_host import (
    ETC_GENERATED,
    jail_argv,
    jail_binary,
    probe_bwrap,
    processes_of_uid,
    shared_etc,
    system_binds,
)
from clawgym_env.sandbox.base import JAIL_ENV, ExecResult, SandboxConfig

__all__ = ["UIDS", "check_config", "exec_argv", "exit_127", "sandbox_env", "static_args"]

UIDS = {"root": 0, "user": 1000}
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def check_config(cfg: SandboxConfig, overlay: bool) -> None:
    """Refuse a config this bwrap cannot run (``overlay``: it has ``--overlay``), naming the field and the fix."""
    if not cfg.workspace_mount.startswith("/") or cfg.workspace_mount == "/":
        raise ConfigError(f"SandboxConfig.workspace_mount: {cfg.workspace_mount!r} must be an absolute folder")
    if cfg.workspace_src is not None and not Path(cfg.workspace_src).is_dir():
        raise ConfigError(f"SandboxConfig.workspace_src: {cfg.workspace_src} is not a folder")
    if cfg.workspace_layers and not overlay:
        raise ConfigError("SandboxConfig.workspace_layers: this bwrap has no --overlay; pass one workspace_src")
    if cfg.proxy_socket is not None and not Path(cfg.proxy_socket).exists():
        raise ConfigError(f"SandboxConfig.proxy_socket: {cfg.proxy_socket} does not exist; start the proxy first")
    for m in cfg.mounts:
        if not Path(m.host).exists():
            raise ConfigError(f"SandboxConfig.mounts: host path {m.host} does not exist")
    if cfg.rootfs is not None and not (Path(cfg.rootfs) / "bin").exists():
        raise ConfigError(f"SandboxConfig.rootfs: {cfg.rootfs} has no bin/; point it at a root filesystem")


def static_args(cfg: SandboxConfig, uid: int, home: str, d: Path, bwrap: str) -> list[str]:
    """The part of every exec's command line fixed at start: namespaces, users, system folders, /etc,
    /proc, /dev, /tmp and HOME (``d``'s folders), the proxy socket, and for a sealed sandbox the jail binary."""
    a = [
        "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--uid", str(uid), "--gid", str(uid), "--hostname", "clawgym",
    ]  # fmt: skip
    a += system_binds(cfg.rootfs)
    etc = shared_etc()
    if cfg.rootfs is None:
        a += ["--ro-bind", str(etc), "/etc"]
    else:  # the rootfs brings its own /etc; only our users and hosts go on top
        for name in ETC_GENERATED:
            a += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    a += ["--proc", "/proc", "--dev", "/dev"]
    a += ["--bind", str(d / "tmp"), "/tmp", "--bind", str(d / "home"), home]
    # no host interpreter inside (pyenv, venv): agent and verifier see the same system python
    if cfg.proxy_socket is not None:
        a += ["--ro-bind", str(cfg.proxy_socket), _bridge.SOCKET_INSIDE]
    if cfg.sealed:
        a += jail_binary(bwrap)[0]
    return a


def _jail_env(cfg: SandboxConfig, bwrap: str) -> dict[str, str]:
    """Where and how graders run agent code (``grading._agent_jail``); a host where a bwrap cannot
    run inside a bwrap gets a jail that refuses, so such graders fail loudly, never run unjailed."""
    if not cfg.sealed:
        return {}
    reason = probe_bwrap().jail
    hide = [m.inside for m in cfg.mounts]
    if reason:
        return {JAIL_ENV: json.dumps({"kind": "unavailable", "why": f"no nested bwrap here: {reason}", "hide": hide})}
    return {JAIL_ENV: json.dumps({"kind": "bwrap", "argv": jail_argv(jail_binary(bwrap)[1]), "hide": hide})}


def sandbox_env(cfg: SandboxConfig, uid: int, home: str, bwrap: str, env: Mapping[str, str] | None) -> dict[str, str]:
    """An exec's whole environment: ours, then the config's, then the call's."""
    user = "root" if uid == 0 else "user"
    out = {"PATH": _PATH, "HOME": home, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
           "TMPDIR": "/tmp", "TERM": "dumb", **_jail_env(cfg, bwrap)}  # fmt: skip
    out.update(cfg.env)
    out.update(env or {})
    return out


def exec_argv(
    cfg: SandboxConfig,
    cmd: Sequence[str],
    *,
    bwrap: str,
    base: Sequence[str],
    d: Path,
    overlay: bool,
    extra: Mapping[str, Path],
    workdir: Path,
    cwd: str | None,
    binds: Sequence[str],
    bridge: str | None,
    fd_args: Sequence[str],
    cgrouped: bool,
) -> list[str]:
    """The whole command line of one exec: the workspace as an overlay (``d/final`` the top lower layer,
    ``d/upper`` the upper one) or a bind, the upload folders ``extra``, config mounts after the
    workspace (so one inside it lies on top), ``binds``, then ``cmd`` (behind the proxy bridge's prelude
    when ``bridge`` is one started inside: "socat", "python"), under RLIMIT_NPROC unless ``cgrouped`` (the
    caller moves it into the sandbox's cgroup). ``fd_args``: options naming descriptors the caller passes
    (seccomp, the hold's)."""
    lowers = [cfg.workspace_src or (d / "empty"), *cfg.workspace_layers, d / "final"]
    a = [bwrap, *base, *fd_args]
    for top, host in sorted(extra.items()):
        a += ["--bind", str(host), top]
    if overlay:
        a += [x for low in lowers for x in ("--overlay-src", str(low))]  # the last one on top
        a += ["--overlay", str(d / "upper"), str(workdir), cfg.workspace_mount]
    else:
        a += ["--bind", str(d / "upper"), cfg.workspace_mount]
    a += [x for m in cfg.mounts for x in ("--bind" if m.writable else "--ro-bind", str(m.host), m.inside)]
    a += list(binds)
    a += ["--remount-ro", "/", "--chdir", cwd or cfg.workspace_mount, "--"]
    if bridge in ("socat", "python"):
        a += _bridge.prelude(cfg.proxy_port, bridge == "socat")
    a += list(cmd)
    if not cgrouped and cfg.pids and (prlimit := shutil.which("prlimit")):
        # No cgroup: RLIMIT_NPROC as a fork-bomb safety net. It counts every process of
        # this host uid, so allow what already runs plus the sandbox's share.
        return [prlimit, f"--nproc={processes_of_uid(os.getuid()) + cfg.pids}", "--", *a]
    return a


def exit_127(result: ExecResult) -> ExecResult:
    """bwrap's "command not found" as from a shell (and the docker backend): 127."""
    if result.return_code == 1 and result.stderr.startswith("bwrap: execvp "):
        return dataclasses.replace(result, return_code=127)
    return result
