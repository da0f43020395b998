"""Grader for glossary-extract: exact entries, first-file-wins duplicates, case-insensitive order."""
from pathlib import Path

EXPECTED = [
    "- **api key**: the secret a customer uses to call the booking API.",
    "- **Cage**: a wheeled metal container holding up to 40 parcels.",
    "- **Depot**: a warehouse where parcels are sorted between legs.",
    "- **Leg**: one trip of a vehicle between two depots.",
    "- **Manifest**: the list of parcels loaded onto one leg.",
    "- **SLA breach**: a parcel delivered later than its promised window.",
    "- **Surcharge**: an extra fee for parcels over 30 kg.",
]


def _term(entry):
    return entry.split("**")[1].strip().lower() if entry.count("**") >= 2 else None


def grade(transcript, workspace_path):
    scores = {"all_terms": 0.0, "no_extra_terms": 0.0, "definitions_exact": 0.0, "sorted": 0.0}
    try:
        lines = (Path(workspace_path) / "output" / "glossary.md").read_text(encoding="utf-8").splitlines()
    except Exception:
        return scores
    entries = [ln.strip() for ln in lines if ln.strip().startswith("- ")]
    terms = [_term(e) for e in entries]
    want = [_term(e) for e in EXPECTED]
    # recall and precision count together: every candidate term (or a single right one) is not half a glossary
    if set(want) == set(terms) and len(terms) == len(set(terms)):
        scores["all_terms"] = scores["no_extra_terms"] = 1.0
    if sorted(entries) == sorted(EXPECTED):
        scores["definitions_exact"] = 1.0
    if entries == EXPECTED and lines[0].strip() == "# Glossary":
        scores["sorted"] = 1.0
    return scores
