"""Code checks for incident-postmortem: impact figures, timeline shape, owned action items."""
import json
import re
from pathlib import Path

SECTIONS = ["Summary", "Impact", "Timeline", "Root cause", "Action items"]


def _sections(text):
    out, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^##\s+(.+?)\s*$", line)
        if m:
            current = m.group(1).strip()
            out[current] = []
        elif current:
            out[current].append(line)
    return out


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"impact_json": 0.0, "sections": 0.0, "impact_stated": 0.0, "timeline": 0.0, "action_items": 0.0}
    try:
        data = json.loads((out / "impact.json").read_text(encoding="utf-8"))
        if int(data["duration_minutes"]) == 45 and int(data["failed_requests"]) == 3510:
            scores["impact_json"] = 1.0
    except Exception:
        pass
    try:
        sec = _sections((out / "postmortem.md").read_text(encoding="utf-8"))
    except Exception:
        return scores
    if all(s in sec for s in SECTIONS):
        scores["sections"] = 1.0
    impact = "\n".join(sec.get("Impact", []))
    if re.search(r"\b45\s*(minutes|min)\b", impact) and re.search(r"3[,.\s]?510\b", impact):
        scores["impact_stated"] = 1.0
    bullets = [ln.strip() for ln in sec.get("Timeline", []) if re.match(r"^\s*[-*]\s", ln)]
    if len(bullets) >= 6 and all(re.match(r"^[-*]\s+\**\d{2}:\d{2}", b) for b in bullets):
        scores["timeline"] = 1.0
    actions = [ln.strip() for ln in sec.get("Action items", []) if re.match(r"^\s*(?:[-*]|\d+\.)\s", ln)]
    if len(actions) >= 3 and all(re.search(r"\(owner:\s*[^)]+\)\.?\s*$", a) for a in actions):
        scores["action_items"] = 1.0
    if not scores["impact_stated"]:
        scores["sections"] = 0.0  # the headings alone are free: they count once the impact in them is right
    return scores
