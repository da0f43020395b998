"""ClawGym's directory layout: ``<task>/data_entry.json``, ``input_files/``, hidden ``reward/``.

Each task keeps exactly what its own verifier expects: the workspace appears at
``input_mount_dir`` (normally /root/.openclaw/workspace) and ``reward/`` is copied, after the
agent finishes, to ``<workspace>/reward`` where ``reward.sh`` looks for ``check.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from clawgym_env.authoring.importers._write import ImportReport, copy_tree, slug_id, write_task
from clawgym_env.errors import ConfigError
from clawgym_env.task.loader import escape_template

__all__ = ["OPENCLAW_WORKSPACE", "import_clawgym", "task_dirs"]

OPENCLAW_WORKSPACE = "/root/.openclaw/workspace"


def task_dirs(src: Path) -> list[Path]:
    """The task folders under ``src`` (or ``src`` itself when it is one task)."""
    if (src / "data_entry.json").is_file():
        return [src]
    found = sorted(p for p in src.iterdir() if (p / "data_entry.json").is_file()) if src.is_dir() else []
    if not found:
        raise ConfigError(f"{src}: no data_entry.json here or in its subfolders. Fix: point at a ClawGym dataset folder.")
    return found


def clawgym_task(entry: dict[str, Any], origin: str, has_workspace: bool) -> dict[str, Any]:
    """The task.yaml mapping for one ClawGym task (the caller copies the folders)."""
    original = str(entry.get("task_id") or origin)
    meta = dict(entry.get("metadata") or {})
    return {
        "id": slug_id(original),
        "version": 1,
        "category": str(meta.get("category") or "clawgym"),
        "difficulty": "medium",
        "instruction": escape_template(str(entry.get("user_query") or "")),
        **({"workspace": "workspace"} if has_workspace else {}),
        "workspace_mount": str(entry.get("input_mount_dir") or OPENCLAW_WORKSPACE),
        "hidden": "hidden",
        "hidden_mount": "reward",
        "verifiers": [{"kind": "script", "file": "hidden/reward.sh", "name": "reward"}],
        "metadata": {"source_format": "clawgym", "original_id": original, **meta},
    }


def import_clawgym(src: Path, stage: Path, report: ImportReport) -> None:
    """Write one task per ClawGym task folder under ``src`` into ``stage``; a folder that is not a
    valid task (no data_entry.json, no reward.sh, a link pointing out) is listed in ``report.skipped``."""
    seen: set[str] = set()
    dirs = task_dirs(src)
    if dirs != [src]:
        report.skipped += [
            f"{p}: no data_entry.json" for p in sorted(src.iterdir()) if p.is_dir() and not p.name.startswith(".") and p not in dirs
        ]
    for tdir in dirs:
        entry_file = tdir / "data_entry.json"
        try:
            entry = json.loads(entry_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            report.skipped.append(f"{entry_file}: unreadable ({exc})")
            continue
        if not isinstance(entry, dict) or not str(entry.get("user_query") or "").strip():
            report.skipped.append(f"{entry_file}: no user_query")
            continue
        if not (tdir / "reward" / "reward.sh").is_file():
            report.skipped.append(f"{tdir / 'reward' / 'reward.sh'}: missing")
            continue
        has_ws = (tdir / "input_files").is_dir()
        task = clawgym_task(entry, tdir.name, has_ws)
        if task["id"] in seen:
            report.skipped.append(f"{tdir}: duplicate id {task['id']}")
            continue
        out = write_task(stage, task)
        try:
            if has_ws:
                copy_tree(tdir / "input_files", out / "workspace")
            copy_tree(tdir / "reward", out / "hidden")
        except ConfigError as exc:
            shutil.rmtree(out)
            report.skipped.append(str(exc))
            continue
        seen.add(task["id"])
        report.sources[out.name] = tdir
        report.tasks += 1
