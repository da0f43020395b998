"""JobBench as published (Job-Bench/job-bench-eval and its Hugging Face dataset).

Layouts read: the dataset snapshot (``dataset/`` = split main, ``dataset_easy/`` = split easy), the
folder ``setup.sh`` syncs it to (``main/`` and ``easy/``, beside ``.setup/``, whose download cache
and retired tasks are ignored), or one split's ``<occupation>/taskN/`` folders. A task is
``RUBRICS.json`` + ``task_card.md`` + ``task_folder/TASK_INSTRUCTIONS.txt``; its id is the official
``<split>--<occupation>--taskN``. As the official runners lay it out, the workspace holds
``task_folder/`` and an empty ``output/`` for the deliverables; ``files_required_to_search/`` (what the
agent must find by itself) and the runs' ``model_output/``, ``eval_result/`` never enter it, nor does
the task card. Rubrics are checked as the official validator checks them and graded the official way
(``grading: jobbench``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from clawgym_env.authoring.importers._write import ImportReport, copy_tree, write_task
from clawgym_env.errors import ConfigError
from clawgym_env.grading.deliverables import libreoffice

__all__ = ["SPLITS", "import_jobbench", "rubric_items"]

SPLITS = ("main", "easy")
_SPLIT_DIRS = {"dataset": "main", "dataset_easy": "easy", "main": "main", "easy": "easy"}
_OCCUPATION = re.compile(r"[a-z0-9][a-z0-9_-]*")
_TASK = re.compile(r"task([1-9][0-9]*)")
_LIMITS = {"wall_time_s": 3600, "model_calls": 1000, "memory_mb": 8192}
"""The official runs: an hour per task (TIMEOUT_PER_TASK, Harbor's agent timeout), no call limit, 8 GB."""
_INSTRUCTION = """\
Your task folder is /workspace/task_folder.

1. Read TASK_INSTRUCTIONS.txt in the task folder.
2. Read the files its Reference Files section names, from the same folder, with whatever tools or code you need \
(spreadsheets, Word files, databases and slides may need code to read).
3. Do the task as TASK_INSTRUCTIONS.txt describes it.
4. Save your final deliverables, and only those, in /workspace/output: no drafts or temporary files there. If \
the task has you change a workbook or database, save the changed copy in /workspace/output too.

Work inside /workspace only. Where sources disagree or something is ambiguous, say how you resolved it and why.
"""


def rubric_items(data: Any) -> list[dict[str, Any]]:
    """RUBRICS.json content -> rubric items, refusing what the official validator refuses (ValueError says what)."""
    entries = None
    if isinstance(data, dict):
        entries = data.get("rubrics") or data.get("evaluation_rubrics")
    if not isinstance(entries, list) or not entries:
        raise ValueError('expected {"rubrics": [...]} (or "evaluation_rubrics") with at least one rubric')
    items: list[dict[str, Any]] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"rubric {i} is not an object")
        text, criteria, weight = e.get("rubric"), e.get("criterion"), e.get("weight")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"rubric {i} has no rubric text")
        if not isinstance(criteria, list) or not criteria or any(not isinstance(c, str) or not c.strip() for c in criteria):
            raise ValueError(f"rubric {i}: criterion must be a non-empty list of non-empty strings")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"rubric {i}: weight must be a number >= 0 (it is {weight!r})")
        items.append({"name": f"rubric{i + 1}", "criterion": text, "weight": float(weight), "criteria": list(criteria)})
    if sum(it["weight"] for it in items) <= 0:
        raise ValueError("rubric weights must have a positive total")
    return items


def _split_roots(src: Path, report: ImportReport) -> list[tuple[str, Path]]:
    """(split, folder of <occupation>/taskN/) for each split found under ``src``."""
    if (src / "dataset" / "main").is_dir() or (src / "dataset" / "easy").is_dir():
        src = src / "dataset"  # a job-bench-eval checkout: setup.sh syncs the splits to dataset/main and dataset/easy
    found = [(split, src / name) for name, split in _SPLIT_DIRS.items() if (src / name).is_dir()]
    if found:
        return found
    if src.name in _SPLIT_DIRS:
        return [(_SPLIT_DIRS[src.name], src)]
    if any(_TASK.fullmatch(t.name) for o in src.iterdir() if o.is_dir() for t in o.iterdir()):
        report.mapped.append(f"{src} holds <occupation>/taskN/ folders under no split name: taken as the main split")
        return [("main", src)]
    raise ConfigError(
        f"{src}: no JobBench split here (dataset/, dataset_easy/, main/, easy/ or <occupation>/taskN/). "
        "Fix: point at the dataset snapshot or the job-bench-eval checkout's dataset/ folder."
    )


def _check_task(tdir: Path) -> list[dict[str, Any]]:
    """The task's rubric items, or ValueError naming what the official validator refuses."""
    for name in ("RUBRICS.json", "task_card.md", "task_folder/TASK_INSTRUCTIONS.txt"):
        if (tdir / name).is_symlink() or not (tdir / name).is_file():
            raise ValueError(f"{name} missing")
    for name in ("task_card.md", "task_folder/TASK_INSTRUCTIONS.txt"):
        if not (tdir / name).read_text(encoding="utf-8", errors="replace").strip():
            raise ValueError(f"{name} is empty")
    try:
        data = json.loads((tdir / "RUBRICS.json").read_text(encoding="utf-8"))
    except (UnicodeError, ValueError) as exc:
        raise ValueError(f"RUBRICS.json is not JSON: {exc}") from exc
    try:
        return rubric_items(data)
    except ValueError as exc:
        raise ValueError(f"RUBRICS.json: {exc}") from exc


def _task(stage: Path, report: ImportReport, split: str, occupation: str, tdir: Path) -> bool:
    """Write one task; False (with the reason in report.skipped) when the source is not a valid task."""
    official = f"{split}--{occupation}--{tdir.name}"
    try:
        items = _check_task(tdir)
    except ValueError as exc:
        report.skipped.append(f"{tdir}: {exc}")
        return False
    task_id = official.replace("_", "-")
    if (stage / task_id).exists():
        report.skipped.append(f"{tdir}: a second copy of {official} (one split folder per split)")
        return False
    task: dict[str, Any] = {
        "id": task_id,
        "version": 1,
        "category": occupation,
        "difficulty": "hard" if split == "main" else "easy",
        "instruction": _INSTRUCTION,
        "workspace": "workspace",
        "workspace_mount": "/workspace",
        "verifiers": [
            {"kind": "rubric", "name": "rubric", "grading": "jobbench", "files": ["output"], "max_file_chars": 200_000, "items": items}
        ],
        "limits": dict(_LIMITS),
        "metadata": {
            "source_format": "jobbench",
            "official_id": official,
            "split": split,
            "occupation": occupation,
            "search_files": sorted(p.relative_to(tdir).as_posix() for p in (tdir / "files_required_to_search").rglob("*") if p.is_file()),
        },
    }
    out = write_task(stage, task)
    copy_tree(tdir / "task_folder", out / "workspace" / "task_folder")
    (out / "workspace" / "output").mkdir(parents=True, exist_ok=True)
    report.sources[task_id] = tdir
    report.tasks += 1
    return True


def import_jobbench(src: Path, stage: Path, report: ImportReport, split: str = "all") -> None:
    """Write one rubric-graded task per JobBench task folder of ``split`` (main, easy or all) into ``stage``."""
    if split not in (*SPLITS, "all"):
        raise ConfigError(f"--split {split!r}: JobBench has the splits main and easy. Fix: use main, easy or all.")
    roots = [(s, root) for s, root in _split_roots(src, report) if split in ("all", s)]
    if not roots:
        raise ConfigError(f"{src}: no {split} split here. Fix: point at a folder holding it, or pass --split all.")
    counts: dict[str, int] = {}
    search = 0
    for name, root in roots:
        for occ in sorted(p for p in root.iterdir() if not p.name.startswith(".")):
            if not occ.is_dir() or occ.is_symlink() or not _OCCUPATION.fullmatch(occ.name):
                report.skipped.append(f"{occ}: not an <occupation> folder ([a-z0-9][a-z0-9_-]*)")
                continue
            for tdir in sorted(occ.iterdir(), key=lambda p: (len(p.name), p.name)):
                if not tdir.is_dir() or tdir.is_symlink() or not _TASK.fullmatch(tdir.name):
                    report.skipped.append(f"{tdir}: not a taskN folder")
                elif _task(stage, report, name, occ.name, tdir):
                    counts[name] = counts.get(name, 0) + 1
                    search += (tdir / "files_required_to_search").is_dir()
    engine = libreoffice()
    report.metadata.update({"jobbench_splits": sorted(counts), "official_grader": "Job-Bench/job-bench-eval eval/judge.py"})
    report.mapped += [
        "splits: "
        + ", ".join(f"{s} {n}" for s, n in sorted(counts.items()))
        + "; ids <split>--<occupation>--taskN"
        + " ('_' written '-'; the exact official id in metadata.official_id)",
        "workspace: task_folder/ and an empty output/ at /workspace, as the official runners lay them out; "
        "the task card and rubrics stay out of it",
        "grading: the official rule (grading: jobbench): binary rubrics, reward = passed weight / total weight, "
        "judged on the extracted text of output/ only (no instruction, no chat); an empty output/ scores 0",
        f"limits: {_LIMITS['wall_time_s']} s and {_LIMITS['model_calls']} model calls per task (the official runs: an hour, no call limit)",
    ]
    report.not_mapped += [
        "judge: rubric tasks need an LLM judge at run time (`--judge <backend>` for tasks check / bench run); "
        "without one every rubric scores 0. The official judge is grok-4.3 on xAI; another judge may score differently",
        "images: plot rubrics get the deliverables' images; a judge backend that takes no images fails those rubrics",
    ]
    if search:
        report.not_mapped.append(
            f"files_required_to_search/ ({search} task(s)): withheld, as officially, but the official "
            "agent may search the web for them and ours has no network beyond the model proxy"
        )
    if engine is None:
        report.not_mapped.append(
            "xlsx recalculation: LibreOffice (soffice) is not installed here, so workbooks are "
            "graded on their saved values; install libreoffice-calc where grading runs"
        )
    else:
        report.mapped.append(f"xlsx: formulas, saved values and values recalculated by {engine[1]} where grading runs")
