"""Code checks for incident-postmortem: impact figures, timeline shape, owned action items."""
import json
import re
from pathlib import Path

SECTIONS = ["Summary", "Impact", "Timeline", "Root cause", "Action items"]
LOG_TIMES = {"13:58", "14:07", "14:09", "14:15", "14:21", "14:26", "14:31", "14:38", "14:44", "14:49", "14:52", "15:10"}
KEY_TIMES = {"13:58", "14:07", "14:52"}  # the deploy, the alert, the resolution
PEOPLE = {"amelia", "jun"}


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
    times = [m.group(1) if (m := re.match(r"^[-*]\s+\**(\d{2}:\d{2})", b)) else None for b in bullets]
    # times in the right format are not a timeline: each must be an event's time in the log, the key ones present
    if len(bullets) >= 6 and all(t in LOG_TIMES for t in times) and KEY_TIMES <= set(times):
        scores["timeline"] = 1.0
    actions = [ln.strip() for ln in sec.get("Action items", []) if re.match(r"^\s*(?:[-*]|\d+\.)\s", ln)]
    owners = [m.group(1).strip().lower() if (m := re.search(r"\(owner:\s*([^)]+)\)\.?\s*$", a)) else None
              for a in actions]
    if len(actions) >= 3 and all(o in PEOPLE for o in owners):
        scores["action_items"] = 1.0
    if not scores["impact_stated"]:
        scores["sections"] = 0.0  # the headings alone are free: they count once the impact in them is right
    return scores
