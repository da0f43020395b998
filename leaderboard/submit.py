"""Accepting a submission: validate everything, recompute every number, store atomically.

Nothing submitted is trusted: the suite and its content hash must be registered, every
task x harness x attempt must be present exactly once, the pass rule is the registered
suite's, and all metrics are recomputed from the attempt records with the same
``compute_metrics`` that ``clawgym bench report`` uses.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from clawgym_env.bundle import Bundle, BundleLimits, read_bundle
from clawgym_env.errors import LeaderboardError
from clawgym_env.metrics import compute_metrics, is_pass
from leaderboard.store import AttemptRow, Store, SubmissionRow, SubmitterRow, SuiteRow

__all__ = ["accept_submission"]


def accept_submission(store: Store, submitter: SubmitterRow, data: bytes, limits: BundleLimits | None = None) -> str:
    """Validate bundle bytes and store them; return the new submission id or raise LeaderboardError."""
    bundle = read_bundle(data, limits)
    m = bundle.manifest
    suite = store.suite(m.suite, m.suite_hash)
    if suite is None:
        known = store.suite_names()
        if m.suite not in known:
            raise LeaderboardError(f"unknown suite {m.suite!r}; this leaderboard accepts: {', '.join(known) or 'none yet'}")
        raise LeaderboardError(
            f"suite {m.suite!r} content hash {m.suite_hash.rpartition(':')[2][:16]}... is not a registered version; "
            "re-run against the published suite"
        )
    _check_complete(bundle, suite)
    if m.pass_threshold != suite.pass_threshold:
        raise LeaderboardError(
            f"manifest pass_threshold {m.pass_threshold} differs from the suite's {suite.pass_threshold}"
        )
    sessions = {a.session_id for a in bundle.attempts}
    stray = sorted(set(bundle.captures) - sessions)
    if stray:
        raise LeaderboardError(f"captures/{stray[0]}.jsonl belongs to no attempt in the bundle")
    attempts = [a.model_copy(update={"category": suite.categories.get(a.task_id, a.category)}) for a in bundle.attempts]
    for a in attempts:
        if a.status == "passed" and not is_pass(a, suite.pass_threshold):
            raise LeaderboardError(
                f"attempt ({a.task_id}, {a.harness}, {a.attempt}) says passed but its score {a.score} is below "
                f"the pass threshold {suite.pass_threshold}"
            )
    metrics = compute_metrics(attempts, suite.pass_threshold, ks=_ks(m.attempts)).to_dict()
    _check_summary(bundle.summary, metrics)
    digest = hashlib.sha256(data).hexdigest()
    row = SubmissionRow(
        id=uuid.uuid4().hex[:12],
        suite=m.suite,
        suite_hash=m.suite_hash,
        run_id=m.run_id,
        model=m.model,
        harnesses=m.harnesses,
        attempts_per_task=m.attempts,
        submitter_id=submitter.id,
        created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        bundle_sha256=digest,
        has_captures=bool(bundle.captures),
        evaluation_only=m.evaluation_only,
        metrics=metrics,
        manifest=m.model_dump(mode="json"),
        captures={k: v.decode("utf-8", "replace") for k, v in bundle.captures.items()},
    )
    row.attempts = [
        AttemptRow(task_id=a.task_id, harness=a.harness, attempt=a.attempt, category=a.category, status=a.status,
                   passed=is_pass(a, suite.pass_threshold), score=a.score, record=a.model_dump(mode="json"))
        for a in attempts
    ]
    try:
        with store.session.begin() as s:
            dup = s.scalar(select(SubmissionRow.id).where(SubmissionRow.run_id == m.run_id, SubmissionRow.suite == m.suite))
            if dup is not None:
                raise LeaderboardError(f"run {m.run_id!r} was already submitted (submission {dup})")
            s.add(row)
    except IntegrityError:
        raise LeaderboardError("this exact bundle was already submitted") from None
    return row.id


def _ks(n: int) -> list[int]:
    return sorted({1, n} | {k for k in (2, 4, 8, 16) if k <= n})


def _check_complete(bundle: Bundle, suite: SuiteRow) -> None:
    m = bundle.manifest
    if sorted(m.task_ids) != sorted(suite.task_ids):
        missing = sorted(set(suite.task_ids) - set(m.task_ids))
        extra = sorted(set(m.task_ids) - set(suite.task_ids))
        what = f"missing task {missing[0]!r}" if missing else f"unknown task {extra[0]!r}"
        raise LeaderboardError(f"manifest task_ids do not match suite {m.suite}: {what} (the whole suite is required)")
    if m.attempts < 1 or not m.harnesses:
        raise LeaderboardError("manifest needs attempts >= 1 and at least one harness")
    expected = {(t, h, k) for t in suite.task_ids for h in m.harnesses for k in range(m.attempts)}
    seen: set[tuple[str, str, int]] = set()
    for a in bundle.attempts:
        key = (a.task_id, a.harness, a.attempt)
        if key in seen:
            raise LeaderboardError(f"attempt {key} appears twice")
        if key not in expected:
            raise LeaderboardError(f"attempt {key} is not part of this run (unknown task, harness or attempt index)")
        seen.add(key)
    missing_attempts = sorted(expected - seen)
    if missing_attempts:
        t, h, k = missing_attempts[0]
        raise LeaderboardError(
            f"{len(missing_attempts)} attempts missing, e.g. task {t!r} harness {h!r} attempt {k}; "
            "finish the run with `clawgym bench resume`"
        )


def _check_summary(claimed: dict | None, recomputed: dict) -> None:  # type: ignore[type-arg]
    """Refuse a bundle whose own aggregates disagree with what its attempts give."""
    if claimed is None:
        return
    try:
        pairs = [("mean score", claimed["overall"]["mean_score"], recomputed["overall"]["mean_score"])]
        pairs += [(f"pass@{k}", v, recomputed["overall"]["pass_at"].get(k)) for k, v in claimed["overall"]["pass_at"].items()]
        for h, g in claimed.get("per_harness", {}).items():
            pairs.append((f"{h} mean score", g["mean_score"], recomputed["per_harness"].get(h, {}).get("mean_score")))
    except (KeyError, TypeError, AttributeError):
        raise LeaderboardError("summary.json is not in the form `clawgym bench run` writes") from None
    for what, said, real in pairs:
        if real is None or abs(float(said) - float(real)) > 1e-9:
            raise LeaderboardError(f"summary.json claims {what} = {said}, but the attempts give {real}")
