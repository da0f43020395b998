"""ClawGym's directory layout: ``<task>/data_entry.json``, ``input_files/``, hidden ``reward/``.

Each task keeps exactly what its own verifier expects: the workspace appears at
``input_mount_dir`` (normally /root/.openclaw/workspace) and ``reward/`` is copied, after the
agent finishes, to ``<workspace>/reward`` where ``reward.sh`` looks for ``check.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError
from clawgym_env.task.importers._write import ImportReport, copy_tree, slug_id, write_task
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
    """Write one task per ClawGym task folder under ``src`` into ``stage``."""
    seen: set[str] = set()
    for tdir in task_dirs(src):
        try:
            entry = json.loads((tdir / "data_entry.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            report.skipped.append(f"{tdir.name}: unreadable data_entry.json ({exc})")
            continue
        if not isinstance(entry, dict) or not str(entry.get("user_query") or "").strip():
            report.skipped.append(f"{tdir.name}: data_entry.json has no user_query")
            continue
        if not (tdir / "reward" / "reward.sh").is_file():
            report.skipped.append(f"{tdir.name}: no reward/reward.sh")
            continue
        has_ws = (tdir / "input_files").is_dir()
        task = clawgym_task(entry, tdir.name, has_ws)
        if task["id"] in seen:
            report.skipped.append(f"{tdir.name}: duplicate id {task['id']}")
            continue
        seen.add(task["id"])
        out = write_task(stage, task)
        if has_ws:
            copy_tree(tdir / "input_files", out / "workspace")
        copy_tree(tdir / "reward", out / "hidden")
        report.tasks += 1
