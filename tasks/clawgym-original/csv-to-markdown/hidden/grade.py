"""Grader for csv-to-markdown: parses the markdown table back into cells."""
from pathlib import Path

HEADER = ["plan", "monthly_price_eur", "seats", "storage_gb", "support"]
ROWS = [["Starter", "9", "1", "10", "email"], ["Team", "29", "5", "100", "email"],
        ["Business", "79", "25", "1000", "chat"], ["Enterprise", "249", "100", "10000", "phone"]]
ALIGN = ["left", "right", "right", "right", "left"]


def _cells(line):
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|")):
        return None
    return [c.strip() for c in line[1:-1].split("|")]


def _align(cell):
    c = cell.replace(" ", "")
    if c.endswith(":") and not c.startswith(":") and set(c[:-1]) == {"-"}:
        return "right"
    if set(c) == {"-"} or (c.startswith(":") and set(c[1:]) == {"-"}):
        return "left"
    return None


def grade(transcript, workspace_path):
    scores = {"heading": 0.0, "header_row": 0.0, "data_rows": 0.0, "alignment": 0.0}
    try:
        lines = (Path(workspace_path) / "output" / "plans.md").read_text(encoding="utf-8").splitlines()
    except Exception:
        return scores
    if lines and lines[0].strip() == "# Pricing plans":
        scores["heading"] = 1.0
    table = [_cells(ln) for ln in lines if ln.strip().startswith("|")]
    if len(table) < 2 or any(t is None for t in table):
        return {k: 0.0 for k in scores}
    if table[0] == HEADER:
        scores["header_row"] = 1.0
    if table[2:] == ROWS:
        scores["data_rows"] = 1.0
    if [_align(c) for c in table[1]] == ALIGN:
        scores["alignment"] = 1.0
    if not scores["data_rows"]:
        scores["heading"] = scores["alignment"] = 0.0  # a heading or an alignment row over the wrong table is free
    return scores
