"""Host-side file helpers shared by the backends: removal that survives overlay work dirs, a
check that a download cannot leave a symlink pointing out of its folder, and the clean-up of
what comes out of a sandbox (no special files, no setuid bits)."""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from clawgym_env.sandbox.base import Mount

__all__ = [
    "DEEPER",
    "MAX_DEPTH",
    "OVER_LIMIT",
    "SMALL_TREE",
    "copy_tree_safely",
    "entries_at_most",
    "host_path_in",
    "inside_path",
    "move_into",
    "rmtree_hard",
    "sanitize_tree",
    "strip_escaping_symlinks",
]

log = logging.getLogger("clawgym.sandbox")

MAX_DEPTH = 256
"""Folders nested deeper than this in a folder taken out of a sandbox stay behind: Python's tree walks
(shutil, and os.walk on 3.11) recurse once a level and fail past ~1,000, and an agent can nest 10,000,
which made every episode an internal error (left out of training) and, left on disk, every later one."""
DEEPER = f" (deeper than {MAX_DEPTH} folders)"
"""Suffix of a left-out folder's name."""


def _tree(root: Path) -> tuple[list[Path], list[Path]]:
    """Every entry under folder ``root`` (iteratively, no link followed) but what lies inside folders
    deeper than ``MAX_DEPTH``; and those folders, which are not entered."""
    entries: list[Path] = []
    deep: list[Path] = []
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            found = list(os.scandir(folder))
        except OSError:
            continue
        for e in found:
            p = Path(e.path)
            if e.is_dir(follow_symlinks=False):
                if depth >= MAX_DEPTH:
                    deep.append(p)
                    continue
                stack.append((p, depth + 1))
            entries.append(p)
    return entries, deep


SMALL_TREE = 64
"""Entries a tree may hold to be cleaned or removed on the event loop: measured, handing such work to a thread
cost 0.5-1 ms a time (load 5-7), more than the work itself."""


def entries_at_most(root: Path, limit: int = SMALL_TREE) -> bool:
    """Whether the tree under ``root`` holds at most ``limit`` entries (counting stops past it; an unreadable
    folder counts as too many)."""
    n, stack = 0, [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    n += 1
                    if n > limit:
                        return False
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
        except OSError:
            return False
    return True


def rmtree_hard(path: Path) -> None:
    """Remove ``path`` even where overlayfs left mode-000 folders (its work/work dir)."""

    def _fix(func: object, p: str, exc: BaseException) -> None:
        if isinstance(exc, FileNotFoundError):
            return
        try:
            parent = os.path.dirname(p)
            os.chmod(parent, stat.S_IRWXU)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, stat.S_IRWXU)
                shutil.rmtree(p, onerror=lambda *a: None)
            else:
                os.unlink(p)
        except OSError:
            pass

    if path.exists() or path.is_symlink():
        try:
            shutil.rmtree(path, onerror=lambda f, p, e: _fix(f, p, e[1]))
        except RecursionError:  # nested past Python's recursion limit (an agent's folders): rm walks it
            subprocess.run(["rm", "-rf", "--", str(path)], capture_output=True)


def inside_path(path: str, workspace: str) -> str:
    """Absolute, normalised path inside the sandbox (relative paths are under the workspace)."""
    p = path if path.startswith("/") else posixpath.join(workspace, path)
    return posixpath.normpath(p)


def host_path_in(target: str, roots: Mapping[str, Path], mounts: Sequence[Mount]) -> Path | None:
    """Where the file ``target`` (inside) lies on the host if it is under one of ``roots`` (inside folder ->
    the host folder bound there) and not under a mount; None elsewhere, along a symlink, or at a folder."""
    if any(target == m.inside or target.startswith(m.inside.rstrip("/") + "/") for m in mounts):
        return None
    for inside, host in roots.items():
        if target.startswith(inside.rstrip("/") + "/"):
            path = host
            for part in target[len(inside.rstrip("/")) + 1 :].split("/"):
                if part in ("", ".", "..") or path.is_symlink():
                    return None
                path = path / part
            return None if path.is_symlink() or path.is_dir() else path
    return None


def strip_escaping_symlinks(root: Path) -> list[Path]:
    """Delete symlinks under ``root`` that are absolute or resolve outside it; return them.

    A sandbox controls what it hands back: a link to ``/etc/shadow`` in a downloaded workspace
    must not become a way to read host files later. Folders deeper than ``MAX_DEPTH`` are not
    entered: every caller has left them out already (``copy_tree_safely``) or removes them next
    (``sanitize_tree``).
    """
    removed: list[Path] = []
    root_real = root.resolve()
    candidates = [root] if root.is_symlink() else []
    if root.is_dir() and not root.is_symlink():
        candidates += [p for p in _tree(root)[0] if p.is_symlink()]
    for p in candidates:
        target = os.readlink(p)
        resolved = (p.parent / target).resolve()
        if target.startswith("/") or not resolved.is_relative_to(root_real):
            p.unlink()
            removed.append(p)
    if removed:
        log.warning("download: removed %d symlink(s) pointing outside %s", len(removed), root)
    return removed


def move_into(src: Path, dest: Path) -> None:
    """Move ``src`` to ``dest``; folders merge into an existing folder."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir() and not src.is_symlink() and dest.is_dir():
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
        rmtree_hard(src)
    else:
        if dest.is_dir() and not dest.is_symlink():
            rmtree_hard(dest)
        elif dest.exists() or dest.is_symlink():
            dest.unlink()
        shutil.move(str(src), str(dest))


_DROP_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
OVER_LIMIT = " (over the disk limit)"
"""Suffix of a left-out file's name: it did not fit in what a folder out of a sandbox may hold."""


class _Budget:
    """The bytes (apparent sizes) a folder taken out of a sandbox may hold, its disk limit: a sparse file
    costs nothing inside (``truncate -s 1T``) but its full size in any copy, so files past it stay behind."""

    def __init__(self, max_bytes: int | None) -> None:
        self.left = max_bytes

    def take(self, size: int) -> bool:
        if self.left is None:
            return True
        if size > self.left:
            return False
        self.left -= size
        return True


def _name(p: Path, root: Path) -> str:
    return p.relative_to(root).as_posix() if p != root else p.name


def sanitize_tree(root: Path, *, keep_whiteouts: bool = False, max_bytes: int | None = None) -> list[str]:
    """Make a folder taken out of a sandbox safe to keep: remove FIFOs, sockets and device files
    (they hang or crash copies and archives) and drop setuid/setgid/sticky bits (a setuid-root file
    made inside must not become one on the host). Returns the removed entries, relative to ``root``.

    ``keep_whiteouts``: ``root`` is an overlay upper layer; its whiteouts (character devices 0/0,
    files the agent deleted) stay, or the deleted files would come back from the layer below.
    Folders deeper than ``MAX_DEPTH`` are removed too (named with ``DEEPER``); ``max_bytes``: so are
    regular files past that many bytes in all, in path order (named with ``OVER_LIMIT``)."""
    removed: list[str] = []
    entries = [root] if not root.is_dir() or root.is_symlink() else []
    if not entries:
        entries, deep = _tree(root)
        entries.append(root)
        for p in deep:
            rmtree_hard(p)
            removed.append(p.relative_to(root).as_posix() + DEEPER)
    budget = _Budget(max_bytes)
    for p in sorted(entries):  # path order: what the budget keeps does not depend on the walk
        try:
            st = p.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            continue
        if keep_whiteouts and stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            p.unlink()
            removed.append(_name(p, root))
        elif stat.S_ISREG(st.st_mode) and not budget.take(st.st_size):
            p.unlink()
            removed.append(_name(p, root) + OVER_LIMIT)
        elif st.st_mode & _DROP_BITS:
            os.chmod(p, stat.S_IMODE(st.st_mode) & ~_DROP_BITS)
    if removed:
        log.warning("removed %d entries (special files, past the disk limit, nested too deep) from %s", len(removed), root)
    return sorted(removed)


def copy_tree_safely(src: Path, dst: Path, *, private: bool = False, max_bytes: int | None = None) -> list[str]:
    """Copy folder ``src`` to ``dst`` (created): regular files, folders and symlinks (as links) only.

    Special files are skipped and returned (relative paths); setuid/setgid/sticky bits are dropped;
    ``private`` also drops every group and other permission (saved workspaces under ``runs/``);
    regular files past ``max_bytes`` in all are skipped too (name + ``OVER_LIMIT``), and so are folders
    deeper than ``MAX_DEPTH`` (name + ``DEEPER``).
    """
    mask = 0o700 if private else 0o777
    skipped: list[str] = []
    budget = _Budget(max_bytes)
    dirs: list[tuple[Path, int]] = []
    stack = [(Path(src), Path(dst), 0)]
    while stack:  # depth first, in path order, without recursion
        s, d, depth = stack.pop()
        d.mkdir(parents=True, exist_ok=False)
        dirs.append((d, stat.S_IMODE(s.lstat().st_mode)))
        below: list[tuple[Path, Path, int]] = []
        for e in sorted(os.scandir(s), key=lambda e: e.name):
            st = e.stat(follow_symlinks=False)
            target = d / e.name
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(e.path), target)
            elif stat.S_ISDIR(st.st_mode) and depth >= MAX_DEPTH:
                skipped.append(target.relative_to(dst).as_posix() + DEEPER)
            elif stat.S_ISDIR(st.st_mode):
                below.append((Path(e.path), target, depth + 1))
            elif stat.S_ISREG(st.st_mode) and not budget.take(st.st_size):
                skipped.append(target.relative_to(dst).as_posix() + OVER_LIMIT)
            elif stat.S_ISREG(st.st_mode):
                shutil.copyfile(e.path, target, follow_symlinks=False)
                os.chmod(target, stat.S_IMODE(st.st_mode) & ~_DROP_BITS & mask)
            else:
                skipped.append(target.relative_to(dst).as_posix())
        stack += reversed(below)
    for d, mode in reversed(dirs):
        os.chmod(d, (mode | stat.S_IRWXU) & ~_DROP_BITS & mask)
    return skipped
