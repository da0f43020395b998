"""The images a judge sees for a rubric about a plot: image files among the deliverables, then images
embedded in Word files, then notebook image outputs, each distinct image once, eight at most (as
JobBench's evaluator attaches them); only rubrics that speak of plots, figures and the like get them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_IMAGES", "VISUAL_RUBRIC", "Image", "collect_images", "needs_images"]

MAX_IMAGES = 8
MAX_IMAGE_BYTES = 1 << 20
"""Larger images are left out (the judge prompt and the sandbox's output both stay bounded)."""
VISUAL_RUBRIC = re.compile(
    r"\b(plot|figure|visuali[sz](?:ation|e)|heatmap|histogram|scatter ?plot|biplot|diagram|"
    r"q[- ]?q)\b",
    re.IGNORECASE,
)
_MIME = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


@dataclass(frozen=True)
class Image:
    """One attached image: where it came from, its type, and its bytes as base64."""

    name: str
    mime: str
    data: str

    @property
    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.data}"


def needs_images(rubric_text: str) -> bool:
    """Whether a rubric (its text and criteria, joined) asks about something visual."""
    return VISUAL_RUBRIC.search(rubric_text) is not None


class _Collector:
    def __init__(self, cap: int) -> None:
        self.cap, self.images, self.seen = cap, list[Image](), set[str]()

    @property
    def full(self) -> bool:
        return len(self.images) >= self.cap

    def add(self, name: str, mime: str, raw: bytes) -> None:
        digest = hashlib.sha256(raw).hexdigest()
        if self.full or len(raw) > MAX_IMAGE_BYTES or digest in self.seen:
            return
        self.seen.add(digest)
        self.images.append(Image(name, mime, base64.b64encode(raw).decode("ascii")))


def _suffix(name: str) -> str:
    return Path(name).suffix.lower().lstrip(".")


def collect_images(folder: Path, files: list[Path], cap: int = MAX_IMAGES) -> list[Image]:
    """Up to ``cap`` distinct images of the deliverables ``files`` (paths inside ``folder``, sorted)."""
    got = _Collector(cap)
    for path in files:
        if _suffix(path.name) in _MIME and path.stat().st_size <= MAX_IMAGE_BYTES:
            got.add(path.relative_to(folder).as_posix(), _MIME[_suffix(path.name)], path.read_bytes())
    for path in (p for p in files if _suffix(p.name) == "docx"):
        try:
            with zipfile.ZipFile(path) as archive:
                for info in sorted(archive.infolist(), key=lambda i: i.filename):
                    if (
                        info.filename.startswith("word/media/")
                        and _suffix(info.filename) in _MIME
                        and info.file_size <= MAX_IMAGE_BYTES
                        and not got.full
                    ):
                        got.add(f"{path.relative_to(folder).as_posix()}:{info.filename}", _MIME[_suffix(info.filename)], archive.read(info))
        except (zipfile.BadZipFile, OSError):
            continue
    for path in (p for p in files if _suffix(p.name) == "ipynb"):
        try:
            notebook = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        cells = notebook.get("cells", []) if isinstance(notebook, dict) else []
        for ci, cell in enumerate(cells if isinstance(cells, list) else []):
            outputs = cell.get("outputs", []) if isinstance(cell, dict) else []
            for oi, output in enumerate(outputs if isinstance(outputs, list) else []):
                data = output.get("data") if isinstance(output, dict) else None
                for mime in ("image/png", "image/jpeg", "image/gif", "image/webp"):
                    encoded = data.get(mime) if isinstance(data, dict) else None
                    encoded = "".join(encoded) if isinstance(encoded, list) else encoded
                    if not isinstance(encoded, str) or len(encoded) > MAX_IMAGE_BYTES * 2:
                        continue
                    try:
                        raw = base64.b64decode("".join(encoded.split()), validate=True)
                    except (ValueError, binascii.Error):
                        continue
                    got.add(f"{path.relative_to(folder).as_posix()}:cell-{ci}-output-{oi}:{mime}", mime, raw)
    return got.images
