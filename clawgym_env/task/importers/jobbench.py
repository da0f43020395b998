"""JobBench's layout: ``<occupation>/taskN/`` with ``RUBRICS.json`` and ``task_folder/``.

``RUBRICS.json`` is ``{"rubrics": [{"rubric", "weight", "criterion": [...]}]}``; each entry
becomes one rubric item the judge answers yes / partial / no for, listing its criteria.
``task_folder/`` (instructions plus starter files) seeds the workspace, as does
``files_required_to_search/`` when present. Deliverables go to ``outputs/``, which the judge reads.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError
from clawgym_env.task.importers._write import ImportReport, copy_tree, slug_id, write_task
from clawgym_env.task.loader import escape_template

__all__ = ["import_jobbench", "rubric_items"]

_OPTIONS = {"yes": 1.0, "partial": 0.5, "no": 0.0}


def rubric_items(data: Any) -> list[dict[str, Any]]:
    """RUBRICS.json content -> rubric items; raises ValueError naming what is wrong."""
    entries = data.get("rubrics") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError('expected {"rubrics": [...]} with at least one entry')
    items: list[dict[str, Any]] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"rubrics[{i}] is not an object")
        text, crit, weight = e.get("rubric"), e.get("criterion", []), e.get("weight", 1)
        if isinstance(crit, str):
            crit = [crit]
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"rubrics[{i}].rubric is empty")
        if not isinstance(crit, list) or not all(isinstance(c, str) for c in crit):
            raise ValueError(f"rubrics[{i}].criterion must be a list of strings")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"rubrics[{i}].weight must be a non-negative number")
        criterion = text.strip()
        if crit:
            criterion += "\nIt is met when all of these hold:\n" + "\n".join(f"- {c.strip()}" for c in crit if c.strip())
        items.append({"name": f"rubric{i + 1}", "criterion": criterion, "weight": float(weight), "options": dict(_OPTIONS)})
    if sum(it["weight"] for it in items) <= 0:
        raise ValueError("rubric weights sum to 0")
    return items


def _tasks(src: Path) -> list[Path]:
    found = sorted(p.parent for p in src.rglob("RUBRICS.json") if (p.parent / "task_folder").is_dir())
    if not found:
        raise ConfigError(f"{src}: no <occupation>/taskN/ folder with RUBRICS.json and task_folder/. Fix: point at a JobBench folder.")
    return found


def import_jobbench(src: Path, stage: Path, report: ImportReport) -> None:
    """Write one rubric-graded task per JobBench task folder into ``stage``."""
    for tdir in _tasks(src):
        rel = tdir.relative_to(src).as_posix() if tdir != src else tdir.name
        instructions = tdir / "task_folder" / "TASK_INSTRUCTIONS.txt"
        if not instructions.is_file() or not instructions.read_text(encoding="utf-8", errors="replace").strip():
            report.skipped.append(f"{rel}: task_folder/TASK_INSTRUCTIONS.txt missing or empty")
            continue
        try:
            items = rubric_items(json.loads((tdir / "RUBRICS.json").read_text(encoding="utf-8")))
        except ValueError as exc:
            report.skipped.append(f"{rel}: RUBRICS.json: {exc}")
            continue
        occupation = tdir.parent.name if tdir != src else "jobbench"
        task_id = slug_id(f"{occupation}-{tdir.name}")
        if (stage / task_id).exists():
            report.skipped.append(f"{rel}: duplicate id {task_id}")
            continue
        text = instructions.read_text(encoding="utf-8", errors="replace").strip()
        instruction = (
            escape_template(text)
            + "\n\nThe workspace holds the task files. Save every deliverable in the outputs/ folder of the workspace."
        )
        task: dict[str, Any] = {
            "id": task_id,
            "version": 1,
            "category": occupation,
            "difficulty": "hard",
            "instruction": instruction,
            "workspace": "workspace",
            "workspace_mount": "/workspace",
            "verifiers": [{"kind": "rubric", "name": "rubric", "items": items, "files": ["outputs/**"]}],
            "limits": {"wall_time_s": 1800, "model_calls": 100, "memory_mb": 4096},
            "metadata": {"source_format": "jobbench", "original_path": rel, "occupation": occupation},
        }
        out = write_task(stage, task)
        copy_tree(tdir / "task_folder", out / "workspace")
        if (tdir / "files_required_to_search").is_dir():
            copy_tree(tdir / "files_required_to_search", out / "workspace" / "files_required_to_search")
        if (tdir / "task_card.md").is_file():
            (out / "task_card.md").write_bytes((tdir / "task_card.md").read_bytes())
        report.tasks += 1
