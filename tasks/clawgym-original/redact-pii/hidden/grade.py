"""Grader for redact-pii: PII gone, Luhn-failing numbers and all other text kept, counts right."""
import json
from pathlib import Path

FILES = ["T-1041.txt", "T-1042.txt", "T-1043.txt"]
EMAILS = ["helga.brandt@mailbox.example", "r.okafor@corp-mail.example", "billing-team@ourshop.example"]
PHONES = ["+44 20 7946 0958", "(555) 010-2234", "555.010.9999"]
CARDS = ["4111 1111 1111 1111", "5500-0000-0000-0004", "6011000990139424"]
EXPECTED = {'T-1041.txt': 'Ticket T-1041 (priority: high)\nFrom: Helga Brandt <[EMAIL]>\nCustomer says the card [CARD] was charged twice for order 7700 1234 5678 0000.\nCall back on [PHONE] before 5pm.\n',
    'T-1042.txt': 'Ticket T-1042 (priority: low)\nFrom: [EMAIL]\nPlease update billing to card [CARD]. The old one was 4000 1234 5678 9010 (already expired, the\ncustomer typed it wrong anyway). Reach me at [PHONE] or on my cell [PHONE].\nCC: [EMAIL]\n',
    'T-1043.txt': 'Ticket T-1043 (priority: medium)\nFrom: Anonymous\nThe checkout page shows error 1234 5678 9012 3456 when paying with [CARD].\nNo contact details given. Reference number 2026-11-30-0042.\n'}


def _texts(ws):
    out = {}
    for name in FILES:
        try:
            out[name] = (Path(ws) / "output" / "redacted" / name).read_text(encoding="utf-8")
        except Exception:
            return None
    return out


def _in_place(texts, tag):
    """Every expected line holding ``tag`` is in its file as expected: the tag replaced that value and nothing
    around it changed (a file of placeholders alone redacts nothing, it deletes the ticket)."""
    for name in FILES:
        got = {ln.rstrip() for ln in texts[name].splitlines()}
        if any(tag in ln and ln.rstrip() not in got for ln in EXPECTED[name].splitlines()):
            return False
    return True


def grade(transcript, workspace_path):
    scores = {"emails_redacted": 0.0, "phones_redacted": 0.0, "cards_redacted": 0.0,
              "other_text_kept": 0.0, "counts": 0.0}
    texts = _texts(workspace_path)
    if texts is None:
        return scores
    blob = "\n".join(texts.values())
    for key, tag, originals in (("emails_redacted", "[EMAIL]", EMAILS), ("phones_redacted", "[PHONE]", PHONES),
                                ("cards_redacted", "[CARD]", CARDS)):
        if not any(v in blob for v in originals) and blob.count(tag) == 3 and _in_place(texts, tag):
            scores[key] = 1.0
    if all(texts[n].rstrip() == EXPECTED[n].rstrip() for n in FILES):
        scores["other_text_kept"] = 1.0
    try:
        counts = json.loads((Path(workspace_path) / "output" / "redaction_counts.json").read_text(encoding="utf-8"))
        # the counts of replacements that were not made right are a guess, not a count
        made = scores["emails_redacted"] and scores["phones_redacted"] and scores["cards_redacted"]
        if made and {k: int(v) for k, v in counts.items()} == {"EMAIL": 3, "PHONE": 3, "CARD": 3}:
            scores["counts"] = 1.0
    except Exception:
        pass
    return scores
