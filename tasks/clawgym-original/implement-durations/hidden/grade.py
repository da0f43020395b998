"""Grader for implement-durations: the agent's functions run in the grading jail (``clawgym_grading``:
another sandbox that cannot read this file or reach this process), whose probe emits what they
returned (or which exception they raised) as plain JSON; every comparison happens here, so a
returned object that claims to equal anything, or a probe that exits early, scores nothing."""
import json
from pathlib import Path

from clawgym_grading import agent_values

SINGLE = [("90", 90), ("45s", 45), ("2d", 172800), ("3h", 10800), ("0", 0), ("15m", 900)]
COMBINED = [("1h30m", 5400), ("1h 5m 10s", 3910), (" 1H30M ", 5400), ("1d1s", 86401), ("2h0m", 7200)]
INVALID = ["", "5x", "h", "1.5h", "-3m", "30m1h", "1h1h", "m5"]
FORMAT = {0: "0s", 90: "1m30s", 3600: "1h", 93784: "1d2h3m4s", 86400: "1d", 61: "1m1s"}
ROUND_TRIP = [1, 59, 3599, 86399, 200000]
PROBE = r'''
import json, sys
sys.path.insert(0, ".")
req = json.loads(sys.argv[1])
def call(fn, arg):
    try:
        v = fn(arg)
    except ValueError:
        return ["ValueError"]
    except Exception as exc:
        return ["error"]
    return ["value", v if type(v) in (int, str) else None]
out = None
try:
    import durations
    out = {
        "parse": [call(durations.parse_duration, t) for t in req["parse"]],
        "format": [call(durations.format_duration, n) for n in req["format"]],
        "negative": call(durations.format_duration, -1),
    }
except Exception:
    pass
emit(out)
'''


def _probe(ws):
    parse = [t for t, _ in SINGLE + COMBINED] + INVALID
    request = {"parse": parse, "format": list(FORMAT) + ROUND_TRIP}
    out = agent_values(PROBE, json.dumps(request), cwd=ws, timeout=30)
    return out if isinstance(out, dict) else None


def _round_trip(ws, formatted):
    """parse_duration(format_duration(n)) == n, checked on the strings format_duration returned."""
    if not all(isinstance(s, str) for s in formatted):
        return False
    try:
        back = agent_values(PROBE, json.dumps({"parse": formatted, "format": []}), cwd=ws, timeout=30)["parse"]
    except Exception:
        return False
    return back == [["value", n] for n in ROUND_TRIP]


def grade(transcript, workspace_path):
    scores = {"single_units": 0.0, "combined_units": 0.0, "invalid_rejected": 0.0, "format_duration": 0.0}
    if not (Path(workspace_path) / "durations.py").is_file():
        return scores
    out = _probe(workspace_path)
    if out is None:
        return scores
    try:
        parsed, formatted = out["parse"], out["format"]
        n1, n2 = len(SINGLE), len(SINGLE) + len(COMBINED)
        scores["single_units"] = float(parsed[:n1] == [["value", w] for _, w in SINGLE])
        scores["combined_units"] = float(parsed[n1:n2] == [["value", w] for _, w in COMBINED])
        scores["invalid_rejected"] = float(parsed[n2:] == [["ValueError"]] * len(INVALID))
        fixed = formatted[: len(FORMAT)] == [["value", w] for w in FORMAT.values()]
        trip = [v[1] if v[0] == "value" else None for v in formatted[len(FORMAT):]]
        if fixed and out["negative"] == ["ValueError"] and _round_trip(workspace_path, trip):
            scores["format_duration"] = 1.0
    except Exception:
        return {k: 0.0 for k in scores}
    return scores
