"""Deliverables reach a judge as JobBench's evaluator extracts them: workbooks with formulas, saved and
recalculated values; Word, PDF, slides, notebooks, databases as text; images only for plot rubrics."""

from __future__ import annotations

import json
import re
import sqlite3
import zipfile
from pathlib import Path

import openpyxl
import pytest

from clawgym_env.grading.deliverables import (
    MAX_CHARS_PER_FILE,
    Extraction,
    ExtractionError,
    extract_folder,
    file_text,
    libreoffice,
    needs_images,
)


def write_pdf(path: Path, lines: list[str]) -> None:
    """A one-page PDF holding ``lines`` as text (Helvetica), offsets computed so any reader takes it."""
    ops = " ".join(f"BT /F1 12 Tf 72 {720 - 16 * i} Td ({line}) Tj ET" for i, line in enumerate(lines))
    objects = [
        "<</Type/Catalog/Pages 2 0 R>>",
        "<</Type/Pages/Kids[3 0 R]/Count 1>>",
        "<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]/Contents 4 0 R/Resources<</Font<</F1 5 0 R>>>>>>",
        f"<</Length {len(ops)}>>stream\n{ops}\nendstream",
        "<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>",
    ]
    out, offsets = "%PDF-1.4\n", []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n" + "".join(f"{o:010d} 00000 n \n" for o in offsets)
    out += f"trailer\n<</Size {len(objects) + 1}/Root 1 0 R>>\nstartxref\n{xref}\n%%EOF\n"
    path.write_bytes(out.encode("latin-1"))


def write_budget(path: Path, *, stale_total: int | None = None, formula: str = "=SUM(B2:B3)") -> None:
    """A workbook whose B4 is a formula; ``stale_total`` saves a wrong cached value for it, as an agent's
    script that edited the file without recalculating would leave it."""
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Budget"
    for row in (("item", "cost"), ("rent", 1200), ("food", 300)):
        ws.append(row)
    ws["A4"], ws["B4"] = "total", formula
    wb.save(path)
    if stale_total is None:
        return
    with zipfile.ZipFile(path) as src:
        items = [(i, src.read(i.filename)) for i in src.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info, data in items:
            if info.filename == "xl/worksheets/sheet1.xml":
                data = re.sub(rb"(<c r=\"B4\"[^>]*><f>[^<]*</f>)(<v\s*/>|<v></v>)?", rb"\1<v>%d</v>" % stale_total, data)
            dst.writestr(info, data)


def test_a_workbook_gives_formulas_saved_and_recalculated_values(tmp_path: Path) -> None:
    assert libreoffice() is not None, "LibreOffice recalculates workbooks: apt-get install libreoffice-calc-nogui"
    write_budget(tmp_path / "budget.xlsx", stale_total=999)
    assert openpyxl.load_workbook(tmp_path / "budget.xlsx", data_only=True)["Budget"]["B4"].value == 999
    text = file_text(tmp_path / "budget.xlsx")
    assert text.startswith("=== Workbook: recalculated by LibreOffice")
    assert "B4: =SUM(B2:B3) | saved value: 999 | recalculated: 1500" in text
    assert "4,total,1500" in text and "999" not in text.split("Values (CSV")[1]  # the grid shows the recalculated total
    saved = file_text(tmp_path / "budget.xlsx", recalculate=False)
    assert "not recalculated" in saved and "4,total,999" in saved and "saved value may be stale" in saved


def test_volatile_formulas_and_bombs_are_not_recalculated(tmp_path: Path) -> None:
    write_budget(tmp_path / "now.xlsx", formula="=NOW()+B2")
    text = file_text(tmp_path / "now.xlsx")
    assert "not recalculated: Budget!B4 (=NOW()+B2)" in text and "B4: =NOW()+B2 | saved value: (none)" in text
    with zipfile.ZipFile(tmp_path / "bomb.xlsx", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("xl/sharedStrings.xml", b"0" * (129 << 20))
    with pytest.raises(ExtractionError, match="expands past 128 MiB"):
        extract_folder(tmp_path)


def test_documents_slides_notebooks_and_databases(tmp_path: Path) -> None:
    import docx
    from pptx import Presentation
    from pptx.util import Inches

    memo = docx.Document()
    memo.add_heading("Budget memo", 1)
    memo.add_paragraph("The total cost is 1,500 dollars.")
    memo.save(tmp_path / "memo.docx")
    write_pdf(tmp_path / "report.pdf", ["Quarterly report", "Revenue grew 12.5 percent"])
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Q3 results"
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(1, 1).text = "region", "north"
    deck.save(tmp_path / "deck.pptx")
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "source": ["import os\n", "os.system('touch /tmp/ran')"],
                "outputs": [
                    {
                        "output_type": "execute_result",
                        "data": {
                            "text/html": "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td>"
                            "<td>2</td></tr></table><script>alert(1)</script>"
                        },
                    },
                    {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": ["Traceback", "ValueError: bad"]},
                ],
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "analysis.ipynb").write_text(json.dumps(notebook))
    con = sqlite3.connect(tmp_path / "data.db")
    con.execute("CREATE TABLE t(a, b)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, i * i) for i in range(600)])
    con.execute("CREATE VIEW forever AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c")
    con.commit()
    con.close()
    (tmp_path / "notes.md").write_text("# Notes\nsee memo")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01")
    got = {f.path: f.text for f in extract_folder(tmp_path).files}
    assert list(got) == sorted(got)
    assert "# Budget memo" in got["memo.docx"] and "1,500 dollars" in got["memo.docx"]
    assert got["report.pdf"].startswith("=== Page 1 ===") and "Revenue grew 12.5 percent" in got["report.pdf"]
    assert "Q3 results" in got["deck.pptx"] and "region\t" in got["deck.pptx"] and "\tnorth" in got["deck.pptx"]
    nb = got["analysis.ipynb"]
    assert "os.system('touch /tmp/ran')" in nb and "a\tb\n1\t2" in nb and "alert" not in nb and "ValueError: bad" in nb
    db = got["data.db"]
    assert "CREATE VIEW forever" in db and "-- rows: 600; shown: 500" in db and "499,249001" in db and "500,250000" not in db
    assert got["notes.md"] == "# Notes\nsee memo" and "unsupported file type .bin" in got["blob.bin"]


def test_each_file_is_cut_at_the_official_cap_and_a_broken_one_is_named(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("x" * (MAX_CHARS_PER_FILE + 10))
    (tmp_path / "broken.docx").write_bytes(b"not a zip")
    found = {f.path: f for f in extract_folder(tmp_path).files}
    assert found["long.txt"].truncated and len(found["long.txt"].text) < MAX_CHARS_PER_FILE + 100
    assert found["broken.docx"].error and "could not be read" in found["broken.docx"].text
    assert extract_folder(tmp_path / "missing").files == []


def test_images_go_to_plot_rubrics_only(tmp_path: Path) -> None:
    from PIL import Image as PILImage

    PILImage.new("RGB", (8, 8), "red").save(tmp_path / "chart.png")
    PILImage.new("RGB", (8, 8), "red").save(tmp_path / "same.png")  # the same bytes: attached once
    PILImage.new("RGB", (8, 8), "blue").save(tmp_path / "other.jpg")
    found = extract_folder(tmp_path)
    assert [i.name for i in found.images] == ["chart.png", "other.jpg"]
    assert found.images[0].data_url.startswith("data:image/png;base64,")
    assert "[Image file chart.png: no text to extract]" in found.judge_text()
    assert needs_images("A bar plot of monthly costs") and needs_images("Q-Q diagram") and not needs_images("totals")
    again = Extraction.from_json(json.loads(json.dumps(found.to_json())))
    assert again == found
