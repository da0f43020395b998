"""Grader for backup-rotation: exact keep/delete partition under the daily/weekly/monthly policy."""
from pathlib import Path

ALL_DATES = """
2026-08-20 2026-08-21 2026-08-22 2026-08-23 2026-08-24 2026-08-25 2026-08-26 2026-08-27
2026-08-28 2026-08-29 2026-08-31 2026-09-02 2026-09-03 2026-09-05 2026-09-06 2026-09-07
2026-09-08 2026-09-11 2026-09-13 2026-09-14 2026-09-16 2026-09-17 2026-09-18 2026-09-19
2026-09-20 2026-09-21 2026-09-22 2026-09-23 2026-09-24 2026-09-25 2026-09-26 2026-09-27
2026-09-28 2026-09-29 2026-09-30 2026-10-01 2026-10-03 2026-10-04 2026-10-05 2026-10-06
2026-10-07 2026-10-08 2026-10-10 2026-10-11 2026-10-12 2026-10-13 2026-10-14 2026-10-16
2026-10-17 2026-10-18 2026-10-20 2026-10-21 2026-10-22 2026-10-24 2026-10-27 2026-10-29
2026-10-30 2026-10-31 2026-11-01 2026-11-03 2026-11-05 2026-11-06 2026-11-07 2026-11-08
2026-11-09 2026-11-10 2026-11-11 2026-11-12 2026-11-13 2026-11-14 2026-11-15 2026-11-17
2026-11-18 2026-11-19 2026-11-20 2026-11-21 2026-11-22 2026-11-25 2026-11-26 2026-11-27
2026-11-28 2026-11-29
""".split()
KEEP_DATES = ["2026-09-30", "2026-10-31", "2026-11-08", "2026-11-15", "2026-11-21", "2026-11-22",
              "2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29"]
ALL = ["backup-%s.tar.gz" % d for d in ALL_DATES]
KEEP = ["backup-%s.tar.gz" % d for d in KEEP_DATES]
DELETE = sorted(set(ALL) - set(KEEP))
DAILY = KEEP[-7:]
MONTHLY = ["backup-2026-09-30.tar.gz", "backup-2026-10-31.tar.gz"]


def _lines(path):
    try:
        return [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except Exception:
        return None


def grade(transcript, workspace_path):
    out = Path(workspace_path) / "output"
    keep, delete = _lines(out / "keep.txt"), _lines(out / "delete.txt")
    scores = {"daily_rule": 0.0, "weekly_monthly_rules": 0.0, "keep_exact": 0.0, "delete_exact": 0.0, "sorted": 0.0}
    if keep is None:
        return scores
    # a rule is applied right only if nothing it should drop is kept: keeping everything follows no rule
    precise = set(keep) <= set(KEEP)
    if precise and set(DAILY) <= set(keep):
        scores["daily_rule"] = 1.0
    if precise and set(MONTHLY + ["backup-2026-11-08.tar.gz", "backup-2026-11-15.tar.gz"]) <= set(keep):
        scores["weekly_monthly_rules"] = 1.0
    if sorted(keep) == KEEP:
        scores["keep_exact"] = 1.0
    if delete is not None and sorted(delete) == DELETE:
        scores["delete_exact"] = 1.0
        if keep == KEEP and delete == DELETE:
            scores["sorted"] = 1.0
    return scores
