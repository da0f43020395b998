"""OfficeQA's CSV (``uid, question, answer, source_docs, source_files, difficulty``).

Each row becomes a task whose workspace holds its source documents under ``docs/`` (found by
path or file name in ``--docs``, default: the CSV's folder), graded by an ``answer`` verifier
(numbers within tolerance). The reference solution is the expected answer in answer tags.
"""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError
from clawgym_env.task.importers._write import ImportReport, slug_id, write_task
from clawgym_env.task.loader import escape_template

__all__ = ["REQUIRED_COLUMNS", "import_officeqa"]

REQUIRED_COLUMNS = ("uid", "question", "answer", "source_files")


class _Docs:
    """Finds a source file by relative path, by name, or by stem (a PDF's parsed .txt)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.by_name: dict[str, Path] = {}
        self.by_stem: dict[str, Path] = {}
        for p in sorted(root.rglob("*")):
            if p.is_file() and not p.name.endswith(".csv"):
                self.by_name.setdefault(p.name, p)
                self.by_stem.setdefault(p.stem, p)

    def find(self, name: str) -> Path | None:
        direct = self.root / name
        if ".." not in Path(name).parts and direct.is_file():
            return direct
        base = Path(name).name
        return self.by_name.get(base) or self.by_stem.get(Path(base).stem)


def import_officeqa(src: Path, stage: Path, report: ImportReport, docs: Path | None = None, tolerance: float = 0.05) -> None:
    """Write one answer-graded task per CSV row of ``src`` into ``stage``."""
    docs_root = docs or src.parent
    if not docs_root.is_dir():
        raise ConfigError(f"--docs {docs_root}: not a folder. Fix: point at the folder holding the source documents.")
    finder = _Docs(docs_root)
    with src.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(f"{src}: columns {', '.join(missing)} missing. Fix: use the OfficeQA CSV header "
                              "uid,question,answer,source_docs,source_files,difficulty.")
        for n, row in enumerate(reader, start=2):
            uid = (row.get("uid") or "").strip()
            question, answer = (row.get("question") or "").strip(), (row.get("answer") or "").strip()
            if not uid or not question or not answer:
                report.skipped.append(f"row {n}: uid, question or answer is empty")
                continue
            task_id = slug_id(uid)
            if (stage / task_id).exists():
                report.skipped.append(f"row {n}: duplicate id {task_id}")
                continue
            names = [s.strip() for s in re.split(r"[\n,;|]", row.get("source_files") or "") if s.strip()]
            found = {name: finder.find(name) for name in names}
            lost = [name for name, p in found.items() if p is None]
            if not names or lost:
                report.skipped.append(f"row {n} ({uid}): source file(s) not found in {docs_root}: {', '.join(lost) or '(none listed)'}")
                continue
            listing = "\n".join(f"- docs/{p.name}" for p in found.values() if p is not None)
            difficulty = (row.get("difficulty") or "").strip().lower()
            task: dict[str, Any] = {
                "id": task_id,
                "version": 1,
                "category": "analysis",
                "difficulty": difficulty if difficulty in ("easy", "medium", "hard") else "medium",
                "instruction": escape_template(question)
                + f"\n\nAnswer from these documents in the workspace:\n{listing}\n\n"
                "End your reply with the final answer inside <answer></answer> tags.",
                "workspace": "workspace",
                "workspace_mount": "/workspace",
                "verifiers": [{"kind": "answer", "name": "answer", "expected": answer, "tolerance": tolerance,
                               "tag": "answer", "source": "final_message"}],
                "solution": "solution/final_message.txt",
                "metadata": {"source_format": "officeqa", "uid": uid,
                             "source_docs": (row.get("source_docs") or "").strip()},
            }
            out = write_task(stage, task)
            (out / "workspace" / "docs").mkdir(parents=True, exist_ok=True)
            for p in found.values():
                assert p is not None
                shutil.copyfile(p, out / "workspace" / "docs" / p.name)
            (out / "solution").mkdir()
            (out / "solution" / "final_message.txt").write_text(f"<answer>{answer}</answer>\n", encoding="utf-8")
            report.tasks += 1
