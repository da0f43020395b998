"""The results folder on disk: atomic writes, reading it back, removing what killed attempts left.

An attempt counts as finished exactly when its attempts/ file exists (written tmp + fsync + rename,
after its capture is complete), so everything here can trust that one rule.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from pydantic import ValidationError

from clawgym_env.errors import RunError
from clawgym_env.results import AttemptResult, RunManifest, attempt_filename


def write_json_atomic(path: Path, data: str) -> None:
    """Write ``data`` to ``path`` so that a reader (or a crash) sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _first_error(exc: ValueError) -> str:
    """One line for a pydantic error (its str() spans several lines and ends in a URL)."""
    if isinstance(exc, ValidationError) and exc.errors():
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        more = f"; {exc.error_count() - 1} more" if exc.error_count() > 1 else ""
        return f"{where + ': ' if where else ''}{err['msg']}{more}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def load_manifest(out_dir: Path) -> RunManifest:
    """Read ``manifest.json`` of a results folder, with a clear error if it is missing or invalid."""
    path = Path(out_dir) / "manifest.json"
    if not path.is_file():
        raise RunError(f"{path}: no manifest.json; is {out_dir} a `clawgym bench run` results folder?")
    try:
        return RunManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RunError(f"{path}: invalid manifest ({_first_error(exc)}); the folder is corrupt or from another version") from exc


def load_attempts(out_dir: Path) -> list[AttemptResult]:
    """Every finished attempt of a results folder, sorted by (task, harness, attempt)."""
    adir = Path(out_dir) / "attempts"
    out: list[AttemptResult] = []
    if not adir.is_dir():
        return out
    for p in sorted(adir.glob("*.json")):
        if p.name.startswith(".tmp-"):
            continue
        try:
            out.append(AttemptResult.model_validate_json(p.read_text(encoding="utf-8")))
        except ValueError as exc:
            raise RunError(
                f"{p}: invalid attempt record ({_first_error(exc)}); delete it and run "
                f"`clawgym bench resume {out_dir}` to rerun that attempt"
            ) from exc
    out.sort(key=lambda a: (a.task_id, a.harness, a.attempt))
    return out


def cleanup_unfinished(out_dir: Path, finished: list[AttemptResult]) -> int:
    """Delete tmp files, captures and workspaces that no finished attempt refers to (killed episodes)."""
    keep = {a.session_id for a in finished}
    keep_ws = {attempt_filename(a.task_id, a.harness, a.attempt)[:-5] for a in finished}
    removed = 0
    for p in (out_dir / "attempts").glob(".tmp-*"):
        p.unlink(missing_ok=True)
        removed += 1
    for p in (out_dir / "captures").glob("*"):
        if p.name.split(".", 1)[0] not in keep:
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
            removed += 1
    wdir = out_dir / "workspaces"
    if wdir.is_dir():
        for p in wdir.iterdir():
            if p.name not in keep_ws:
                shutil.rmtree(p, ignore_errors=True)
                removed += 1
    return removed
