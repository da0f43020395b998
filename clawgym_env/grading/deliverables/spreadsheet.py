"""Workbooks as a judge reads them: every formula beside its saved value and, where LibreOffice is
installed, the value a full recalculation gives (a saved value may be stale, or absent when a
library wrote the file), then the values as a grid. JobBench's evaluator gives its judge the same
evidence; recalculation is skipped where it cannot be deterministic (external links, macros,
volatile or external functions such as NOW, RAND, WEBSERVICE; array formulas).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import signal
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import date, datetime, time
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["REGISTRY_ENV", "ExtractionError", "libreoffice", "libreoffice_registry", "read_workbook"]

MAX_UNCOMPRESSED_BYTES = 128 * 1024 * 1024
MAX_GRID_CELLS = 2_000_000
RECALC_TIMEOUT_S = 90.0
SHEETS_CHARS = 190_000
"""What all sheets of one workbook share (the file's text is cut at 200,000 characters)."""
REGISTRY_ENV = "CLAWGYM_LIBREOFFICE_REGISTRY"
"""Where LibreOffice's shared configuration is, when not where it is installed to look (a sandbox that
shows /usr but not /etc: Debian keeps it in /etc/libreoffice/registry)."""
_UNSTABLE = {"WEBSERVICE", "DDE", "RTD", "CALL", "REGISTER.ID", "NOW", "TODAY", "RAND", "RANDBETWEEN", "RANDARRAY", "CELL", "INFO"}
"""Functions whose value depends on the moment, the machine or the network: no deterministic recalculation."""
_ALWAYS_RECALCULATE = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema">
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="OOXMLRecalcMode" oor:op="fuse"><value>0</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="ODFRecalcMode" oor:op="fuse"><value>0</value></prop></item>
</oor:items>
"""


class ExtractionError(RuntimeError):
    """A deliverable could not be read safely (too large, malformed); the rubric cannot be judged on it."""


@cache
def libreoffice() -> tuple[str, str] | None:
    """(soffice path, version line) when LibreOffice is installed, else None."""
    exe = shutil.which("soffice") or shutil.which("libreoffice")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return exe, (out.stdout.strip().splitlines() or ["LibreOffice"])[0]


def libreoffice_registry() -> Path | None:
    """The folder LibreOffice's shared configuration really lives in (its share/registry, links followed)."""
    found = libreoffice()
    if found is None:
        return None
    registry = (Path(os.path.realpath(found[0])).parent.parent / "share" / "registry").resolve()
    return registry if registry.is_dir() else None


def convert(path: Path, fmt: str, dest: Path) -> Path:
    """``path`` converted by headless LibreOffice into ``dest`` as ``fmt``, every formula recalculated on load."""
    found = libreoffice()
    if found is None:
        raise ExtractionError("LibreOffice is not installed")
    with tempfile.TemporaryDirectory(prefix="clawgym-calc-") as tmp:
        profile = Path(tmp) / "profile"
        (profile / "user").mkdir(parents=True)
        (profile / "user" / "registrymodifications.xcu").write_text(_ALWAYS_RECALCULATE, encoding="utf-8")
        source = Path(tmp) / f"book{path.suffix.lower()}"
        shutil.copyfile(path, source)
        argv = [
            found[0],
            f"-env:UserInstallation={profile.as_uri()}",
            "--headless",
            "--norestore",
            "--nolockcheck",
            "--convert-to",
            fmt,
            "--outdir",
            str(dest),
            str(source),
        ]
        if registry := os.environ.get(REGISTRY_ENV):  # its shared configuration, where a sandbox shows it
            layers = Path(registry).as_uri()
            argv.insert(
                2, f"-env:CONFIGURATION_LAYERS=xcsxcu:{layers} res:{layers} user:!{profile.as_uri()}/user/registrymodifications.xcu"
            )
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8", "SAL_USE_VCLPLUGIN": "svp"}
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=RECALC_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError):  # its helpers, too: the session is its own group
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if timed_out:
            raise ExtractionError(f"LibreOffice ran past {RECALC_TIMEOUT_S:g}s")
    out = dest / f"book.{fmt}"
    if not out.is_file():
        raise ExtractionError(f"LibreOffice could not convert {path.name} (exit {proc.returncode})")
    return out


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, (datetime, date, time)) else value


def _cell_text(value: Any) -> str:
    value = _plain(value)
    return "" if value is None else str(value)


def _unstable(formula: str) -> bool:
    """Whether a formula calls a function recalculation cannot reproduce (or cannot be tokenized)."""
    from openpyxl.formula.tokenizer import Tokenizer, TokenizerError

    try:
        tokens = Tokenizer(formula if formula.startswith("=") else "=" + formula).items
    except (TokenizerError, IndexError):
        return True
    names = {t.value.rstrip("(").upper().removeprefix("_XLFN.") for t in tokens if t.type == "FUNC" and t.subtype == "OPEN"}
    return bool(names & _UNSTABLE)


@dataclass
class _Sheet:
    name: str
    cells: list[tuple[int, int, str, Any, str | None]] = field(default_factory=list)
    """(row, column, coordinate, saved value, formula or None) of every non-empty cell."""


def _scan(path: Path) -> tuple[list[_Sheet], list[str], list[str]]:
    """The workbook's sheets, its defined names, and why it cannot be recalculated (empty: it can)."""
    import openpyxl

    with zipfile.ZipFile(path) as archive:
        if sum(i.file_size for i in archive.infolist()) > MAX_UNCOMPRESSED_BYTES:
            raise ExtractionError(f"{path.name} expands past {MAX_UNCOMPRESSED_BYTES >> 20} MiB")
        names = archive.namelist()
    blockers = []
    if any(n.startswith("xl/externalLinks/") for n in names):
        blockers.append("external links (never refreshed)")
    if any(n.lower().endswith("vbaproject.bin") for n in names):
        blockers.append("macros (never run)")
    formulas = openpyxl.load_workbook(path, data_only=False, read_only=True, keep_links=False)
    saved = openpyxl.load_workbook(path, data_only=True, read_only=True, keep_links=False)
    sheets, defined = [], []
    try:
        for name, definition in formulas.defined_names.items():
            defined.append(f"{name}: {definition.attr_text}")
            if _unstable(definition.attr_text or ""):
                blockers.append(f"defined name {name}")
        for ws in formulas.worksheets:
            if (ws.max_row or 0) * (ws.max_column or 0) > MAX_GRID_CELLS:
                raise ExtractionError(f"sheet {ws.title!r} of {path.name} has more than {MAX_GRID_CELLS:,} cells")
            sheet = _Sheet(ws.title)
            for row, saved_row in zip(ws.iter_rows(), saved[ws.title].iter_rows(), strict=False):
                for cell, saved_cell in zip(row, saved_row, strict=False):
                    if cell.value is None:
                        continue
                    formula = None
                    if cell.data_type == "f":
                        formula = cell.value if isinstance(cell.value, str) else getattr(cell.value, "text", None)
                        if not isinstance(cell.value, str):
                            blockers.append(f"{ws.title}!{cell.coordinate} (array formula)")
                        formula = formula or "[formula openpyxl cannot read]"
                        if _unstable(formula):
                            blockers.append(f"{ws.title}!{cell.coordinate} ({formula[:40]})")
                    sheet.cells.append((cell.row, cell.column, cell.coordinate, _plain(saved_cell.value), formula))
            sheets.append(sheet)
    finally:
        formulas.close()
        saved.close()
    return sheets, defined, blockers


def _recalculated(path: Path) -> dict[str, dict[str, Any]]:
    import openpyxl

    with tempfile.TemporaryDirectory(prefix="clawgym-recalc-") as tmp:
        out = convert(path, "xlsx", Path(tmp))
        book = openpyxl.load_workbook(out, data_only=True, read_only=True)
        try:
            return {
                ws.title: {
                    c.coordinate: _plain(c.value) for row in ws.iter_rows() for c in row if c.value is not None and hasattr(c, "coordinate")
                }
                for ws in book.worksheets
            }
        finally:
            book.close()


def _fit(lines: list[str], budget: int, what: str) -> list[str]:
    """Whole lines up to ``budget`` characters, then one line saying how many were left out."""
    kept: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > budget:
            return [*kept, f"[... {len(lines) - i} more {what} left out]"]
        kept.append(line)
        used += len(line) + 1
    return kept


def _sheet_text(sheet: _Sheet, recalc: dict[str, Any] | None, budget: int) -> str:
    formulas = []
    grid: dict[int, dict[int, str]] = {}
    for row, col, coord, saved, formula in sheet.cells:
        shown = recalc.get(coord) if recalc is not None and formula is not None else saved
        if formula is not None:
            line = f"{coord}: {formula} | saved value: {_cell_text(saved) or '(none)'}"
            if recalc is not None:
                line += f" | recalculated: {_cell_text(recalc.get(coord)) or '(empty)'}"
            formulas.append(line)
        if _cell_text(shown) != "":
            grid.setdefault(row, {})[col] = _cell_text(shown)
    from openpyxl.utils import get_column_letter

    columns = sorted({c for cells in grid.values() for c in cells})
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["row", *(get_column_letter(c) for c in columns)])
    for row in sorted(grid):
        writer.writerow([row, *(grid[row].get(c, "") for c in columns)])
    rows = buf.getvalue().splitlines()
    head = [f"=== Sheet: {sheet.name} ===", f"Formula cells: {len(formulas)}; non-empty rows: {len(grid)}"]
    body = []
    if formulas:
        body += ["Formulas:", *_fit(formulas, budget // 2, "formulas")]
    used = sum(len(x) + 1 for x in head + body)
    body += ["Values (CSV: row number, then columns):", *_fit(rows, max(200, budget - used), "rows")]
    return "\n".join(head + body)


def read_workbook(path: Path, recalculate: bool = True) -> str:
    """A workbook's text for the judge: status, warnings, defined names, then each sheet."""
    if path.suffix.lower() == ".xls":
        if libreoffice() is None:
            return f"[Legacy .xls workbook {path.name}: not read (LibreOffice, which converts it, is not installed)]"
        with tempfile.TemporaryDirectory(prefix="clawgym-xls-") as tmp:
            return read_workbook(convert(path, "xlsx", Path(tmp)), recalculate=False).replace(
                "=== Workbook:", "=== Workbook (converted from .xls by LibreOffice):", 1
            )
    sheets, defined, blockers = _scan(path)
    has_formulas = any(f is not None for s in sheets for *_, f in s.cells)
    recalc: dict[str, dict[str, Any]] | None = None
    if not has_formulas:
        status = "no formulas"
    elif blockers:
        status = "not recalculated: " + "; ".join(blockers[:10])
    elif not recalculate:
        status = "not recalculated"
    elif (engine := libreoffice()) is None:
        status = "not recalculated: LibreOffice is not installed"
    else:
        recalc = _recalculated(path)
        status = f"recalculated by {engine[1]}"
    parts = [f"=== Workbook: {status} ==="]
    if has_formulas and recalc is None:
        parts.append(
            "[Formula values below are the values saved in the file, not recalculated: an empty saved "
            "value does not mean the formula is absent, and a saved value may be stale.]"
        )
    if defined:
        parts.append("Defined names:\n" + "\n".join(defined[:200]))
    share = max(1000, SHEETS_CHARS // max(1, len(sheets)))
    parts += [_sheet_text(s, (recalc or {}).get(s.name, {}) if recalc is not None else None, share) for s in sheets]
    return "\n".join(parts)
