"""A tmpfs of its own under each sandbox's folders: limits the kernel enforces while the episode runs.

``nr_inodes`` bounds how many files and folders an agent can make (creating one more fails with
ENOSPC inside the sandbox), ``size`` how many bytes; and whatever it left goes with one unmount, in the
kernel, however many files there are (400,000 empty files took minutes of ``rmtree`` on a loaded host;
an unmount frees 100,000 in about half a second there). Mounting needs host root (CAP_SYS_ADMIN); where
this process may not, ``mount_tmpfs`` says so and the sandbox goes without (``clawgym sandbox doctor``).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
from pathlib import Path

__all__ = ["mount_tmpfs", "mounts_under", "unmount"]

_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount_tmpfs(folder: Path, *, max_files: int | None, size_mb: int | None, mode: int = 0o700) -> bool:
    """Mount a fresh tmpfs on ``folder`` holding at most ``max_files`` inodes and ``size_mb`` MiB (None: no
    such bound). False, with nothing mounted, where this process may not mount; other failures raise OSError."""
    opts = [f"mode={mode:o}"]
    if max_files:
        opts.append(f"nr_inodes={max_files}")
    if size_mb:
        opts.append(f"size={size_mb}m")
    if _libc().mount(b"tmpfs", os.fsencode(folder), b"tmpfs", _MS_NOSUID | _MS_NODEV, ",".join(opts).encode()) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EPERM, errno.EACCES):
        return False
    raise OSError(err, f"mount -t tmpfs -o {','.join(opts)} on {folder}: {os.strerror(err)}")


def unmount(folder: Path) -> None:
    """Detach the mount on ``folder`` (a tmpfs's files are freed with it); nothing mounted there is no error."""
    if _libc().umount2(os.fsencode(folder), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOENT):
            raise OSError(err, f"umount {folder}: {os.strerror(err)}")


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes there."""
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mounts_under(root: Path) -> list[Path]:
    """Mount points at or below ``root`` in this mount namespace, deepest first (the order to unmount them)."""
    prefix = str(root).rstrip("/")
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            point = _unescape(fields[4])
            if point == prefix or point.startswith(prefix + "/"):
                found.append(Path(point))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)
