"""Where built and converted models live, and how a folder appears there atomically.

A model folder is built in a temporary sibling and renamed into place, so a crash or a
concurrent builder never leaves a half-written folder that a later run would trust.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_dir", "models_cache_dir"]

_DONE = ".clawgym-complete"


def models_cache_dir() -> Path:
    """``$CLAWGYM_CACHE_DIR/models`` if set, else ``~/.cache/clawgym/models``."""
    root = os.environ.get("CLAWGYM_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "clawgym"
    return base / "models"


def atomic_dir(target: Path, build: Callable[[Path], None]) -> Path:
    """Return ``target``, calling ``build(tmp)`` to create it first if it is not complete yet.

    ``build`` writes into an empty temporary folder next to ``target``; it is renamed into place
    only after ``build`` returns. If another process won the race, its folder is kept.
    """
    if (target / _DONE).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(tmp)
        (tmp / _DONE).write_text("ok\n")
        if target.exists() and not (target / _DONE).exists():
            shutil.rmtree(target, ignore_errors=True)  # left by an older, interrupted layout
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / _DONE).exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
