"""Grader for sensor-anomalies: boundary values (8.0, 65) are inside the limits and must not be flagged."""
import csv
import json
from pathlib import Path

EXPECTED = [
    ("2026-11-28T06:15:00Z", "fridge-b", "temperature_c", "8.4", "above_max"),
    ("2026-11-28T06:45:00Z", "fridge-b", "humidity", "71", "above_max"),
    ("2026-11-28T07:15:00Z", "fridge-c", "temperature_c", "", "missing"),
    ("2026-11-28T07:45:00Z", "fridge-c", "humidity", "28", "below_min"),
    ("2026-11-28T07:45:00Z", "fridge-c", "temperature_c", "1.6", "below_min"),
    ("2026-11-28T09:00:00Z", "fridge-a", "humidity", "", "missing"),
    ("2026-11-28T09:15:00Z", "fridge-b", "temperature_c", "9.9", "above_max"),
]
SUMMARY = {"fridge-a": 1, "fridge-b": 3, "fridge-c": 3}


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    scores = {"all_anomalies_found": 0.0, "no_false_alarms": 0.0, "reasons_and_order": 0.0, "summary": 0.0}
    try:
        with open(out / "anomalies.csv", newline="", encoding="utf-8") as f:
            rows = [tuple(c.strip() for c in r) for r in csv.reader(f) if r]
        assert rows[0] == ("timestamp", "sensor_id", "field", "value", "reason")
        body = rows[1:]
        keys = {r[:3] for r in body}
        want = {e[:3] for e in EXPECTED}
        if want <= keys:
            scores["all_anomalies_found"] = 1.0
        if keys and keys <= want and len(body) == len(keys):
            scores["no_false_alarms"] = 1.0
        if body == EXPECTED:
            scores["reasons_and_order"] = 1.0
    except Exception:
        pass
    try:
        data = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        if {k: int(v) for k, v in data.items()} == SUMMARY:
            scores["summary"] = 1.0
    except Exception:
        pass
    return scores
