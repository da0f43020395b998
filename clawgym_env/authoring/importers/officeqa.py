"""OfficeQA's CSV (``uid, question, answer, source_docs, source_files, difficulty``), as published.

Each row becomes a task whose workspace holds its source documents under ``docs/`` (found by
path or file name in ``--docs``, default: the CSV's folder), graded by an ``answer`` verifier with
OfficeQA's official rule (``rule: officeqa``: the last ``<FINAL_ANSWER>`` of the reply, a direct
answer, tolerance 0 unless one of the official levels is chosen). ``split="pro"`` keeps the hard
questions (OfficeQA Pro); the difficulty is kept as the category. The reference solution is the
expected answer in the answer tags.
"""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path
from typing import Any

from clawgym_env.authoring.importers._write import ImportReport, slug_id, write_task
from clawgym_env.errors import ConfigError
from clawgym_env.grading.officeqa_scoring import FINAL_ANSWER_TAG, OFFICIAL_TOLERANCES
from clawgym_env.task.loader import escape_template

__all__ = ["OFFICIAL_SCORER", "REQUIRED_COLUMNS", "SPLITS", "import_officeqa"]

REQUIRED_COLUMNS = ("uid", "question", "answer", "source_files")
SPLITS = ("full", "pro")
"""full: every question; pro: the hard ones (OfficeQA Pro is the hard half of the full set)."""
OFFICIAL_SCORER = "databricks/officeqa reward.py at 7b9a3c154ef9fb40215bb67934afc43e6799de16"
"""The official scorer whose verdicts ``rule: officeqa`` reproduces (tests/fixtures/officeqa/)."""


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


def _instruction(question: str, listing: str, tag: str) -> str:
    return (
        escape_template(question) + f"\n\nAnswer from these documents in the workspace:\n{listing}\n\n"
        f"End your reply with the final answer alone inside <{tag}></{tag}> tags, for example "
        f"<{tag}>1,234</{tag}>: one value (or one bracketed list when several are asked for), "
        "in the units the question asks for, with no range, alternatives or explanation inside the tags."
    )


def _check_options(tolerance: float, split: str, tag: str) -> None:
    if tolerance not in OFFICIAL_TOLERANCES:
        levels = ", ".join(f"{t:g}" for t in OFFICIAL_TOLERANCES)
        raise ConfigError(
            f"--tolerance {tolerance:g}: not one of OfficeQA's levels. Fix: use one of {levels} (0, the official default, is exact)."
        )
    if split not in SPLITS:
        raise ConfigError(f"--split {split!r}: OfficeQA has the splits {', '.join(SPLITS)}. Fix: pick one.")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", tag):
        raise ConfigError(f"--tag {tag!r}: not a tag name. Fix: use FINAL_ANSWER (official) or e.g. answer.")


def import_officeqa(
    src: Path,
    stage: Path,
    report: ImportReport,
    docs: Path | None = None,
    tolerance: float = 0.0,
    split: str = "full",
    tag: str = FINAL_ANSWER_TAG,
) -> None:
    """Write one answer-graded task per CSV row of ``src`` (of ``split``) into ``stage``."""
    _check_options(tolerance, split, tag)
    docs_root = docs or src.parent
    if not docs_root.is_dir():
        raise ConfigError(f"--docs {docs_root}: not a folder. Fix: point at the folder holding the source documents.")
    finder = _Docs(docs_root)
    left_out = 0
    with src.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(
                f"{src}: columns {', '.join(missing)} missing. Fix: use the OfficeQA CSV header "
                "uid,question,answer,source_docs,source_files,difficulty."
            )
        if split == "pro" and "difficulty" not in (reader.fieldnames or []):
            raise ConfigError(f"{src}: --split pro needs the difficulty column. Fix: use the OfficeQA CSV header.")
        for n, row in enumerate(reader, start=2):
            uid = (row.get("uid") or "").strip()
            question, answer = (row.get("question") or "").strip(), (row.get("answer") or "").strip()
            difficulty = (row.get("difficulty") or "").strip().lower()
            if split == "pro" and difficulty != "hard":
                left_out += 1
                continue
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
            task: dict[str, Any] = {
                "id": task_id,
                "version": 1,
                "category": difficulty or "unrated",
                "difficulty": difficulty if difficulty in ("easy", "medium", "hard") else "medium",
                "instruction": _instruction(question, listing, tag),
                "workspace": "workspace",
                "workspace_mount": "/workspace",
                "verifiers": [
                    {
                        "kind": "answer",
                        "name": "answer",
                        "expected": answer,
                        "tolerance": tolerance,
                        "tag": tag,
                        "source": "final_message",
                        "rule": "officeqa",
                    }
                ],
                "solution": "solution/final_message.txt",
                "metadata": {"source_format": "officeqa", "uid": uid, "source_docs": (row.get("source_docs") or "").strip()},
            }
            out = write_task(stage, task)
            (out / "workspace" / "docs").mkdir(parents=True, exist_ok=True)
            for p in found.values():
                assert p is not None
                shutil.copyfile(p, out / "workspace" / "docs" / p.name)
            (out / "solution").mkdir()
            (out / "solution" / "final_message.txt").write_text(f"<{tag}>{answer}</{tag}>\n", encoding="utf-8")
            report.tasks += 1
    report.metadata.update({"officeqa_split": split, "tolerance": tolerance, "answer_tag": tag, "official_scorer": OFFICIAL_SCORER})
    report.mapped += [
        f"answers: OfficeQA's official rule ({OFFICIAL_SCORER}), tolerance {tolerance:g}"
        + (" (the official default)" if tolerance == 0 else ""),
        f"final answer: the last <{tag}>...</{tag}> of the reply"
        + (" (the official tag)" if tag == FINAL_ANSWER_TAG else f" (the official tag is <{FINAL_ANSWER_TAG}>)")
        + ", else the whole reply; it must be a direct answer",
        f"split {split}"
        + (f": {left_out} easy question(s) left out" if split == "pro" else "")
        + "; the difficulty is the task's category",
        f"source documents: copied from {docs_root} into each workspace's docs/",
    ]
    report.not_mapped.append("source_docs (page links into the scanned bulletins): kept in metadata, not shown to the agent")
