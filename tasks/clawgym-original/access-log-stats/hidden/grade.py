"""Grader for access-log-stats: precomputed figures for logs/access.log."""
import json
from pathlib import Path

STATUS = {"200": 37, "304": 4, "404": 4, "500": 1, "201": 2}


def grade(transcript, workspace_path):
    scores = {"counts": 0.0, "status_counts": 0.0, "top_path": 0.0, "error_rate": 0.0, "bytes_sent": 0.0}
    try:
        data = json.loads((Path(workspace_path) / "output" / "stats.json").read_text(encoding="utf-8"))
        assert isinstance(data, dict)
    except Exception:
        return scores
    checks = {
        "counts": lambda: int(data["total_requests"]) == 48 and int(data["unique_ips"]) == 6,
        "status_counts": lambda: {str(k): int(v) for k, v in data["status_counts"].items()} == STATUS,
        "top_path": lambda: data["top_path"] == "/api/items",
        "error_rate": lambda: abs(float(data["error_rate"]) - 0.104) < 0.0006,
        "bytes_sent": lambda: int(data["bytes_sent"]) == 193874,
    }
    for name, check in checks.items():
        try:
            scores[name] = 1.0 if check() else 0.0
        except Exception:
            pass
    return scores
