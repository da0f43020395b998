"""Grader for disk-alerts: the threshold comes from the rendered instruction."""
import json
import re
from pathlib import Path

EXPECTED = {
    85: (["/var/lib/postgresql", "/var/log", "/opt", "/srv/backups"],
         {"/var/lib/postgresql": 24.6, "/var/log": 19.7, "/opt": 1.2, "/srv/backups": 14.7}),
    90: (["/var/lib/postgresql", "/var/log"], {"/var/lib/postgresql": 24.6, "/var/log": 19.7}),
}


def _threshold(transcript):
    m = re.search(r"at or above (\d+)%", str(transcript.get("instruction", "")))
    return int(m.group(1)) if m and int(m.group(1)) in EXPECTED else 85


def grade(transcript, workspace_path):
    th = _threshold(transcript)
    mounts, free = EXPECTED[th]
    out = Path(workspace_path) / "output"
    scores = {"right_mounts": 0.0, "ordered": 0.0, "json_count": 0.0, "free_space": 0.0}
    try:
        lines = [ln.strip() for ln in (out / f"alerts-{th}.txt").read_text(encoding="utf-8").splitlines() if ln.strip()]
        if set(lines) == set(mounts) and len(lines) == len(mounts):
            scores["right_mounts"] = 1.0
            if lines == mounts:
                scores["ordered"] = 1.0
    except Exception:
        pass
    try:
        data = json.loads((out / f"alerts-{th}.json").read_text(encoding="utf-8"))
        if int(data["threshold"]) == th and int(data["count"]) == len(mounts):
            scores["json_count"] = 1.0
        got = data["free_gb"]
        if set(got) == set(free) and all(abs(float(got[k]) - v) <= 0.051 for k, v in free.items()):
            scores["free_space"] = 1.0
    except Exception:
        pass
    return scores
