"""Grader for invoice-reminders: right invoices, right tier at the 14/15 and 30/31 day edges, filled templates."""
import csv
import re
from pathlib import Path

EXPECTED = {
    "INV-1003": ("accounts@cask.example", "Cask Brewing", "2875.00", 46, "final", "Subject: FINAL NOTICE: invoice INV-1003"),
    "INV-1007": ("ap@alder.example", "Alder & Co", "150.00", 30, "firm", "Subject: Invoice INV-1007 is 30 days overdue"),
    "INV-1006": ("hello@foxglove.example", "Foxglove Studio", "760.00", 15, "firm", "Subject: Invoice INV-1006 is 15 days overdue"),
    "INV-1001": ("ap@alder.example", "Alder & Co", "1200.00", 10, "friendly", "Subject: Friendly reminder: invoice INV-1001"),
    "INV-1002": ("finance@brightline.example", "Brightline Media", "340.50", 1, "friendly", "Subject: Friendly reminder: invoice INV-1002"),
}


def grade(transcript, workspace_path):
    folder = Path(workspace_path) / "output" / "reminders"
    scores = {"right_invoices": 0.0, "headers_and_tiers": 0.0, "placeholders_filled": 0.0, "summary": 0.0}
    try:
        names = {p.stem for p in folder.glob("*.txt") if p.is_file()}
    except Exception:
        return scores
    texts = {}
    for inv in EXPECTED:
        try:
            texts[inv] = (folder / f"{inv}.txt").read_text(encoding="utf-8")
        except Exception:
            pass
    # the right file names count once each file is a reminder to the right address (an empty file reminds no one)
    addressed = all((texts.get(inv, "").strip().splitlines() or [""])[0].strip() == f"To: {v[0]}"
                    for inv, v in EXPECTED.items())
    if names == set(EXPECTED) and addressed:
        scores["right_invoices"] = 1.0
    if len(texts) == len(EXPECTED):
        ok_head = ok_fill = True
        for inv, (email, client, amount, days, _, subject) in EXPECTED.items():
            lines = [ln.strip() for ln in texts[inv].splitlines() if ln.strip()]
            ok_head &= len(lines) >= 2 and lines[0] == f"To: {email}" and lines[1] == subject
            body = texts[inv]
            ok_fill &= "{" not in body and f"Hello {client}," in body and f"EUR {amount}" in body
        scores["headers_and_tiers"] = 1.0 if ok_head else 0.0
        scores["placeholders_filled"] = 1.0 if ok_fill else 0.0
    try:
        with open(folder / "summary.csv", newline="", encoding="utf-8") as f:
            rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
        want = [[inv, v[1], str(v[3]), v[4]] for inv, v in EXPECTED.items()]
        if rows[0] == ["invoice", "client", "days_overdue", "template"] and rows[1:] == want:
            scores["summary"] = 1.0
    except Exception:
        pass
    return scores
