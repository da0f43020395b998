"""Grader for dedupe-contacts: checks unique emails, first-occurrence rows, order and normalisation."""
import csv
from pathlib import Path

EXPECTED = [
    ("Ada Brennan", "ada.brennan@northwind.example"),
    ("Tomasz Olek", "t.olek@fabrikam.example"),
    ("Priya Raman", "praman@contoso.example"),
    ("Lena Hoff", "lena.hoff@tailspin.example"),
    ("Marco Diaz", "marco@adatum.example"),
    ("Jonas Berg", "jonas.berg@litware.example"),
    ("Grace Oduya", "grace.oduya@wingtip.example"),
    ("Hiro Sato", "hiro.sato@proseware.example"),
]


def _rows(ws):
    try:
        with open(Path(ws) / "output" / "contacts_clean.csv", newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            return header, [r for r in reader if r]
    except Exception:
        return None, None


def grade(transcript, workspace_path):
    scores = {"header": 0.0, "unique_people": 0.0, "first_rows_kept": 0.0,
              "original_order": 0.0, "emails_normalised": 0.0}
    header, rows = _rows(workspace_path)
    if header is None:
        return scores
    want = [e for _, e in EXPECTED]
    try:
        people_right = len(rows) == len(want) and {r[1].strip().lower() for r in rows} == set(want)
    except Exception:
        people_right = False
    # the header is copied from the input for free: it counts only once the right people are in the file
    if people_right and [h.strip() for h in header] == ["name", "email", "phone", "company"]:
        scores["header"] = 1.0
    try:
        emails = [r[1].strip().lower() for r in rows]
        want = [e for _, e in EXPECTED]
        if len(emails) == len(set(emails)) and set(emails) == set(want):
            scores["unique_people"] = 1.0
        names = {r[1].strip().lower(): r[0].strip() for r in rows}
        if all(names.get(e) == n for n, e in EXPECTED) and len(rows) == len(EXPECTED):
            scores["first_rows_kept"] = 1.0
        if emails == want:
            scores["original_order"] = 1.0
        if rows and all(r[1] == r[1].strip().lower() for r in rows) and set(emails) == set(want):
            scores["emails_normalised"] = 1.0
    except Exception:
        pass
    return scores
