"""Documents, slides, notebooks and databases as a judge reads them, each the way JobBench's
evaluator extracts it: Word files as Markdown (mammoth, embedded images as placeholders), PDFs page
by page with their layout (pdfplumber), slides with their tables as tab-separated rows (nested groups
too), notebooks' cell sources with their saved outputs (HTML tables as text; nothing is run), SQLite
databases' schema and each table's first 500 rows.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["read_docx", "read_notebook", "read_pdf", "read_pptx", "read_sqlite"]

SQLITE_ROWS = 500
_SQLITE_STEPS = 50_000_000
"""SQLite virtual-machine steps one database may take to read (a count over a huge table is cut short)."""


def read_docx(path: Path) -> str:
    import mammoth

    def placeholder(image: Any) -> dict[str, str]:
        return {"src": "embedded-image", "alt": f"Embedded image: {image.content_type}"}

    with path.open("rb") as fh:
        result = mammoth.convert_to_markdown(fh, convert_image=mammoth.images.img_element(placeholder))
    return str(result.value)


def read_pdf(path: Path) -> str:
    import pdfplumber

    with pdfplumber.open(str(path)) as pdf:
        return "\n".join(f"=== Page {i} ===\n{page.extract_text(layout=True) or ''}" for i, page in enumerate(pdf.pages, start=1))


def _shapes(shapes: Any, parts: list[str]) -> None:
    for shape in shapes:
        try:
            if shape.has_text_frame and shape.text:
                parts.append(shape.text)
            if getattr(shape, "has_table", False) and shape.has_table:
                buf = io.StringIO()
                writer = csv.writer(buf, delimiter="\t", lineterminator="\n")
                for row in shape.table.rows:
                    writer.writerow(["" if cell.is_spanned else cell.text for cell in row.cells])
                parts += [f"=== Table: {shape.name} ===", buf.getvalue().rstrip("\n")]
            if shape.shape_type is not None and hasattr(shape, "shapes"):
                _shapes(shape.shapes, parts)
        except Exception as exc:  # noqa: BLE001 - one unreadable shape must not hide the others
            parts.append(f"[shape {shape.shape_id}: not read: {exc}]")


def read_pptx(path: Path) -> str:
    from pptx import Presentation

    parts: list[str] = []
    for i, slide in enumerate(Presentation(str(path)).slides, start=1):
        parts.append(f"=== Slide {i} ===")
        _shapes(slide.shapes, parts)
    return "\n".join(parts)


class _VisibleText(HTMLParser):
    """An HTML output's visible text: blocks on their own lines, table cells tab-separated, scripts dropped."""

    _HIDDEN: ClassVar[frozenset[str]] = frozenset({"script", "style", "template", "head"})
    _BLOCKS: ClassVar[frozenset[str]] = frozenset(
        {
            "p",
            "div",
            "br",
            "li",
            "ul",
            "ol",
            "table",
            "tr",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "pre",
            "section",
            "article",
            "header",
            "footer",
            "blockquote",
            "dt",
            "dd",
            "hr",
            "figure",
            "figcaption",
        }
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.hidden = 0
        self.cell_open = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._HIDDEN:
            self.hidden += 1
        elif tag in ("td", "th"):
            if self.cell_open:
                self.out.append("\t")
            self.cell_open = True
        elif tag in self._BLOCKS:
            self.out.append("\n")
            self.cell_open = False

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in self._BLOCKS:
            self.out.append("\n")
            self.cell_open = False

    def handle_data(self, data: str) -> None:
        if not self.hidden and data.strip():
            self.out.append(re.sub(r"\s+", " ", data).strip())

    def text(self) -> str:
        return re.sub(r"\n\s*\n+", "\n", "".join(self.out)).strip()


def _joined(value: Any, sep: str = "") -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return sep.join(v for v in value if isinstance(v, str))
    return ""


def _output_text(output: Any) -> list[str]:
    if not isinstance(output, dict):
        return []
    parts = []
    if "text" in output:
        parts.append(_joined(output["text"]))
    if output.get("output_type") == "error":
        summary = ": ".join(x for x in (_joined(output.get("ename")), _joined(output.get("evalue"))) if x)
        trace = _joined(output.get("traceback"), "\n")
        parts += [p for p in (summary if summary not in trace else "", trace) if p]
    data = output.get("data") if output.get("output_type") in ("display_data", "execute_result") else None
    if isinstance(data, dict):
        seen: set[str] = set()
        for mime in ("text/plain", "text/markdown", "text/html", "text/latex", "application/json"):
            if mime not in data:
                continue
            if mime == "application/json":
                text = json.dumps(data[mime], ensure_ascii=False, indent=2)
            elif mime == "text/html":
                parser = _VisibleText()
                parser.feed(_joined(data[mime]))
                text = parser.text()
            else:
                text = _joined(data[mime])
            if text.strip() and text.strip() not in seen:
                seen.add(text.strip())
                parts.append(f"--- {mime} ---\n{text}")
    return [p for p in parts if p]


def read_notebook(path: Path) -> str:
    """Cell sources and their saved outputs; the notebook is never run."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = notebook.get("cells", []) if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise ValueError("not a notebook: no cells list")
    parts = []
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        parts += [f"=== {cell.get('cell_type', 'unknown')} ===", _joined(cell.get("source", ""))]
        for output in cell.get("outputs", []) if isinstance(cell.get("outputs"), list) else []:
            parts += _output_text(output)
    return "\n".join(parts)


def read_sqlite(path: Path) -> str:
    """The schema, then each table's row count and first rows as CSV (tables only: a view may never end)."""
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    steps = [0]

    def budget() -> int:
        steps[0] += 1
        return 1 if steps[0] * 1000 > _SQLITE_STEPS else 0

    con.set_progress_handler(budget, 1000)
    try:
        parts = ["=== Schema ===", *(row[0] for row in con.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL") if row[0])]
        tables = [row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            parts.append(f"\n=== Table: {table} ===")
            quoted = '"' + table.replace('"', '""') + '"'
            try:
                total = con.execute(f"SELECT COUNT(*) FROM {quoted}").fetchone()[0]
                cur = con.execute(f"SELECT * FROM {quoted} LIMIT {SQLITE_ROWS}")
                rows = cur.fetchall()
                parts.append(f"-- rows: {total}; shown: {len(rows)} (the first {SQLITE_ROWS})")
                parts.append(",".join(d[0] for d in cur.description))
                parts += [",".join("" if v is None else str(v) for v in row) for row in rows]
            except sqlite3.Error as exc:
                parts.append(f"[table {table}: not read: {exc}]")
        return "\n".join(parts)
    finally:
        con.close()
