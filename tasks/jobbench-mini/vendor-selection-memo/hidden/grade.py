"""Code checks for vendor-selection-memo: structure and the computable facts (the rubric judges the rest)."""
import re
from pathlib import Path

SECTIONS = ["Summary", "Comparison", "Recommendation", "Risks"]


def _sections(text):
    out, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^##\s+(.+?)\s*$", line)
        if m:
            current = m.group(1).strip()
            out[current] = []
        elif current:
            out[current].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def grade(transcript, workspace_path):
    scores = {"sections": 0.0, "recommends_tallis": 0.0, "first_year_cost": 0.0,
              "exclusions_explained": 0.0, "length": 0.0}
    try:
        text = (Path(workspace_path) / "output" / "memo.md").read_text(encoding="utf-8")
    except Exception:
        return scores
    sec = _sections(text)
    if all(s in sec for s in SECTIONS):
        scores["sections"] = 1.0
    rec = sec.get("Recommendation", "").strip()
    # exactly one vendor: the section's first sentence names Tallis and no other (every vendor listed is a hedge)
    first = re.split(r"(?<=[.!?])\s|\n\s*\n", rec, maxsplit=1)[0] if rec else ""
    if set(re.findall(r"Tallis|Kestrel|Lumen|Orbis", first)) == {"Tallis"}:
        scores["recommends_tallis"] = 1.0
    if re.search(r"221[,.\s]?700|221\.7\s*k", text):
        scores["first_year_cost"] = 1.0
    low = text.lower()
    lumen = re.search(r"lumen[^\n]*(lead|14[- ]days?|delivery)", low) or re.search(r"(lead|14[- ]days?|delivery)[^\n]*lumen", low)
    orbis = re.search(r"orbis[^\n]*(defect|1\.4)", low) or re.search(r"(defect|1\.4)[^\n]*orbis", low)
    if lumen and orbis:
        scores["exclusions_explained"] = 1.0
    words = len(re.findall(r"\w+", text))
    if 150 <= words <= 700 and scores["sections"]:
        scores["length"] = 1.0
    if not scores["recommends_tallis"]:
        # structure, length and quoted figures around the wrong (or no) choice are not part of a right memo
        return {k: 0.0 for k in scores}
    return scores
