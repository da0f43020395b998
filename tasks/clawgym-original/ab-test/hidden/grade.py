"""Grader for ab-test: precomputed figures after excluding the 5 users assigned to both arms."""
import json
from pathlib import Path

ARMS = {"A": (214, 15, 0.0701), "B": (181, 43, 0.2376)}


def grade(transcript, workspace_path):
    scores = {"exclusions": 0.0, "arm_counts": 0.0, "rates_and_lift": 0.0, "z_statistic": 0.0, "winner": 0.0}
    try:
        data = json.loads((Path(workspace_path) / "output" / "result.json").read_text(encoding="utf-8"))
        assert isinstance(data, dict)
    except Exception:
        return scores
    checks = {
        "exclusions": lambda: int(data["excluded_users"]) == 5,
        "arm_counts": lambda: all(int(data[a]["users"]) == u and int(data[a]["conversions"]) == c
                                  for a, (u, c, _) in ARMS.items()),
        "rates_and_lift": lambda: all(abs(float(data[a]["rate"]) - r) < 0.00051 for a, (_, _, r) in ARMS.items())
        and abs(float(data["lift_pct"]) - 238.9) < 0.51,
        "z_statistic": lambda: abs(float(data["z"]) - 4.69) < 0.0051,
        "winner": lambda: data["winner"] == "B" and int(data["excluded_users"]) == 5,
    }
    for name, check in checks.items():
        try:
            scores[name] = 1.0 if check() else 0.0
        except Exception:
            pass
    return scores
