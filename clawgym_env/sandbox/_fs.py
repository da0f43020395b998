"""Host-side file helpers shared by the backends: removal that survives overlay work dirs,
and a check that a download cannot leave a symlink pointing out of its folder."""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import stat
from pathlib import Path

__all__ = ["inside_path", "move_into", "rmtree_hard", "strip_escaping_symlinks"]

log = logging.getLogger("clawgym.sandbox")


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
        shutil.rmtree(path, onerror=lambda f, p, e: _fix(f, p, e[1]))


def inside_path(path: str, workspace: str) -> str:
    """Absolute, normalised path inside the sandbox (relative paths are under the workspace)."""
    p = path if path.startswith("/") else posixpath.join(workspace, path)
    return posixpath.normpath(p)


def strip_escaping_symlinks(root: Path) -> list[Path]:
    """Delete symlinks under ``root`` that are absolute or resolve outside it; return them.

    A sandbox controls what it hands back: a link to ``/etc/shadow`` in a downloaded workspace
    must not become a way to read host files later.
    """
    removed: list[Path] = []
    root_real = root.resolve()
    candidates = [root] if root.is_symlink() else []
    if root.is_dir() and not root.is_symlink():
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                if p.is_symlink():
                    candidates.append(p)
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
