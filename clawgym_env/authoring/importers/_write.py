"""Shared pieces of every importer: ids, YAML output, and the atomic write of a whole suite."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from clawgym_env.errors import ConfigError

__all__ = ["ImportReport", "copy_tree", "dump_yaml", "slug_id", "staged_suite", "write_task"]


@dataclass
class ImportReport:
    """What an import wrote and what it had to leave out (with the reason)."""

    suite: str
    path: Path
    tasks: int = 0
    skipped: list[str] = field(default_factory=list)
    """One line per source entry left out: "<source path>: <reason>"."""
    sources: dict[str, Path] = field(default_factory=dict)
    """Written task folder name -> the source it came from (errors name the source, not the stage)."""
    mapped: list[str] = field(default_factory=list)
    """How the format's own semantics were carried over, one line each (printed by ``tasks import``)."""
    not_mapped: list[str] = field(default_factory=list)
    """What of the format could not be carried over, or needs something the import cannot give."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Suite-level facts the format's tasks share (tolerance, split, official scorer), kept in suite.yaml."""


def slug_id(text: str, fallback: str = "task") -> str:
    """A valid task id ([a-z0-9][a-z0-9-]*) from any text: "task_0000" -> "task-0000"."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or fallback


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not any(ch in value for ch in "\r\t") and value == value.rstrip(" ") else None
    if style and any(line != line.rstrip(" ") for line in value.split("\n")):
        style = None  # literal blocks cannot keep trailing spaces
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data: Any) -> str:
    """YAML for humans: keys in the given order, multi-line text as literal blocks."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a dataset folder: files and folders, and symlinks *as links* when they stay inside
    ``src``. A link pointing outside it (``/etc/passwd``, ``../../secret``), or a FIFO, socket or
    device, raises ``ConfigError`` naming the source file: what it points at is never copied."""
    root = src.resolve()
    for dirpath, dirnames, filenames in os.walk(src):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                target = os.readlink(p)
                if os.path.isabs(target) or not (p.parent / target).resolve().is_relative_to(root):
                    raise ConfigError(
                        f"{p}: a symlink to {target}, outside {src}. Fix: replace it with the file "
                        "itself, or a link that stays inside the task."
                    )
            elif not (p.is_file() or p.is_dir()):
                raise ConfigError(f"{p}: not a regular file or folder (FIFO, socket or device). Fix: remove it.")
    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)


def write_task(suite_dir: Path, task: dict[str, Any]) -> Path:
    """Write ``<suite_dir>/<id>/task.yaml``; returns the task folder (files go in by the caller)."""
    task_dir = suite_dir / task["id"]
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / "task.yaml").write_text(dump_yaml(task), encoding="utf-8")
    return task_dir


@contextlib.contextmanager
def staged_suite(out_dir: Path, force: bool = False) -> Iterator[Path]:
    """Build a suite in a temporary sibling folder; move it to ``out_dir`` only if the block succeeds.

    Readers never see a half-written suite: the final step is a rename. With ``force`` an
    existing suite is replaced (moved aside first, deleted after the new one is in place).
    """
    if out_dir.exists() and not force:
        raise ConfigError(f"{out_dir}: already exists. Fix: pass --force to replace it, or choose another --suite/--out.")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.importing-", dir=out_dir.parent))
    try:
        yield stage
        old = None
        if out_dir.exists():
            old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
            os.replace(out_dir, old)
        os.replace(stage, out_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
