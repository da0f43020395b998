"""What an LLM judge reads of an agent's deliverables: the text of every file in a folder, each file
type extracted the way JobBench's official evaluator extracts it, and the images a plot rubric needs.

Text files are read as UTF-8; workbooks give their formulas, saved values and (with LibreOffice)
recalculated values; Word files, PDFs, slides, notebooks and SQLite databases their text (see
``documents``); images are named, and attached to rubrics that ask about a plot. Each file's text is
cut at 200,000 characters (a database's is not). The judge sees the files only: never the task's
instruction, never the agent's messages.

The files are the agent's, so graders run this in a sandbox of its own (``_driver``), never in the host process.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .documents import read_docx, read_notebook, read_pdf, read_pptx, read_sqlite
from .images import MAX_IMAGES, VISUAL_RUBRIC, Image, collect_images, needs_images
from .spreadsheet import ExtractionError, libreoffice, read_workbook

__all__ = [
    "MAX_CHARS_PER_FILE",
    "MAX_FILES",
    "MAX_IMAGES",
    "MAX_TOTAL_BYTES",
    "VISUAL_RUBRIC",
    "Extraction",
    "ExtractionError",
    "FileText",
    "Image",
    "extract_folder",
    "file_text",
    "libreoffice",
    "needs_images",
]

MAX_CHARS_PER_FILE = 200_000
MAX_FILES = 500
MAX_TOTAL_BYTES = 512 * 1024 * 1024
_TEXT = {
    "txt",
    "md",
    "csv",
    "py",
    "json",
    "sh",
    "log",
    "xml",
    "html",
    "css",
    "js",
    "ts",
    "yaml",
    "yml",
    "ini",
    "cfg",
    "conf",
    "sql",
    "rules",
    "geojson",
}
"""Read as UTF-8: the official evaluator's list (anything else unknown is named, not read)."""
_IMAGES = {"png", "jpg", "jpeg", "gif", "svg", "bmp"}
_DATABASES = {"db", "sqlite", "sqlite3"}


@dataclass(frozen=True)
class FileText:
    """One deliverable's text as the judge gets it."""

    path: str
    """Relative to the deliverables folder."""
    text: str
    truncated: bool = False
    error: str | None = None
    """Why the file could not be read (its text then says so too)."""


@dataclass
class Extraction:
    """Every deliverable's text, and the images a plot rubric is shown."""

    files: list[FileText] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)

    def judge_text(self) -> str:
        """All files in one text, each under a ``=== FILE: <path> ===`` heading."""
        return "\n".join(f"=== FILE: {f.path} ===\n{f.text}\n" for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {"files": [asdict(f) for f in self.files], "images": [asdict(i) for i in self.images]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Extraction:
        return cls([FileText(**f) for f in data.get("files", [])], [Image(**i) for i in data.get("images", [])])


def file_text(path: Path, recalculate: bool = True) -> str:
    """One file's text by its extension (raises on a file its reader cannot parse)."""
    ext = path.suffix.lower().lstrip(".")
    if ext in _TEXT:
        return path.read_text(encoding="utf-8", errors="replace")
    if ext in ("xlsx", "xls"):
        return read_workbook(path, recalculate=recalculate)
    readers = {"docx": read_docx, "pdf": read_pdf, "pptx": read_pptx, "ipynb": read_notebook}
    if ext in readers:
        return readers[ext](path)
    if ext in _DATABASES:
        return read_sqlite(path)
    if ext in _IMAGES:
        return f"[Image file {path.name}: no text to extract]"
    return f"[Binary or unsupported file type .{ext or '(none)'}: {path.name}]"


def _listing(folder: Path) -> list[Path]:
    """The regular files under ``folder`` (links and special files left out), sorted, within the caps."""
    found = sorted(
        Path(d, f)
        for d, _, files in os.walk(folder)
        for f in files  # links to folders not followed
        if Path(d, f).is_file() and not Path(d, f).is_symlink()
    )
    if len(found) > MAX_FILES:
        raise ExtractionError(f"{len(found)} files in the deliverables folder, more than {MAX_FILES}")
    total = sum(p.stat().st_size for p in found)
    if total > MAX_TOTAL_BYTES:
        raise ExtractionError(f"the deliverables hold {total >> 20} MiB, more than {MAX_TOTAL_BYTES >> 20}")
    return found


def extract_folder(folder: Path, *, recalculate: bool = True, images: bool = True, max_chars: int = MAX_CHARS_PER_FILE) -> Extraction:
    """The text of every file under ``folder`` (empty when it is missing), and its images.

    A file its reader cannot parse gets an error line as its text (the others are still judged);
    a workbook too large to read safely raises ``ExtractionError``, as the official evaluator does.
    """
    if not folder.is_dir():
        return Extraction()
    paths = _listing(folder)
    out = Extraction()
    for path in paths:
        rel = path.relative_to(folder).as_posix()
        ext = path.suffix.lower().lstrip(".")
        try:
            text, error = file_text(path, recalculate=recalculate), None
        except ExtractionError as exc:
            raise ExtractionError(f"{rel}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - a malformed deliverable is judged as unreadable
            text, error = f"[ERROR: {rel} could not be read: {type(exc).__name__}: {exc}]", f"{type(exc).__name__}: {exc}"
        cut = ext not in _DATABASES and len(text) > max_chars
        if cut:
            text = text[:max_chars] + f"\n... [cut at {max_chars:,} characters]"
        out.files.append(FileText(rel, text, cut, error))
    if images:
        out.images = collect_images(folder, paths)
    return out
