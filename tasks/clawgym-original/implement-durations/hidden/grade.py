"""Grader for implement-durations: hidden cases run in a subprocess so a hang or crash only costs points."""
import json
import subprocess
import sys
from pathlib import Path

PROBE = r'''
import json, sys
sys.path.insert(0, ".")
import durations
def parse_ok(cases):
    try:
        return all(durations.parse_duration(t) == want for t, want in cases)
    except Exception:
        return False
def rejects(cases):
    for t in cases:
        try:
            durations.parse_duration(t)
            return False
        except ValueError:
            pass
        except Exception:
            return False
    return True
def formats():
    try:
        cases = {0: "0s", 90: "1m30s", 3600: "1h", 93784: "1d2h3m4s", 86400: "1d", 61: "1m1s"}
        if any(durations.format_duration(s) != want for s, want in cases.items()):
            return False
        if any(durations.parse_duration(durations.format_duration(n)) != n for n in (1, 59, 3599, 86399, 200000)):
            return False
        try:
            durations.format_duration(-1)
            return False
        except ValueError:
            return True
    except Exception:
        return False
print(json.dumps({
    "single_units": parse_ok([("90", 90), ("45s", 45), ("2d", 172800), ("3h", 10800), ("0", 0), ("15m", 900)]),
    "combined_units": parse_ok([("1h30m", 5400), ("1h 5m 10s", 3910), (" 1H30M ", 5400), ("1d1s", 86401), ("2h0m", 7200)]),
    "invalid_rejected": rejects(["", "5x", "h", "1.5h", "-3m", "30m1h", "1h1h", "m5"]),
    "format_duration": formats(),
}))
'''


def grade(transcript, workspace_path):
    scores = {"single_units": 0.0, "combined_units": 0.0, "invalid_rejected": 0.0, "format_duration": 0.0}
    if not (Path(workspace_path) / "durations.py").is_file():
        return scores
    try:
        r = subprocess.run([sys.executable, "-c", PROBE], cwd=workspace_path, capture_output=True, text=True, timeout=30)
        result = json.loads(r.stdout.strip().splitlines()[-1])
        for key in scores:
            scores[key] = 1.0 if result.get(key) is True else 0.0
    except Exception:
        pass
    return scores
