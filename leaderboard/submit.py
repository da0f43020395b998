"""Accepting a submission: validate everything, recompute every number, store atomically.

Nothing submitted is trusted: the suite and its content hash must be registered, every
task x harness x attempt must be present exactly once, the pass rule is the registered
suite's, and all metrics are recomputed from the attempt records with the same
``compute_metrics`` (and its default Pass@k list) that ``clawgym bench run`` and
``make_bundle`` use. A bundle with final workspaces is re-graded by the server's own
verifiers and ranked by the server's scores (trust "re-graded"); one without is ranked by its
own scores, checked for consistency only (trust "self-reported"). The database refuses a
second row for the same results.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from typing import Any

from sqlalchemy.exc import IntegrityError

from clawgym_env.bundle import Bundle, BundleLimits, SubmittedAttempt, SubmittedManifest, read_bundle
from clawgym_env.errors import LeaderboardError
from clawgym_env.metrics import compute_metrics, is_pass
from leaderboard.regrade import Verdict, regrade_bundle
from leaderboard.store import AttemptRow, CaptureRow, Store, SubmissionRow, SubmitterRow, SuiteRow

__all__ = ["accept_submission", "results_digest"]


def accept_submission(
    store: Store, submitter: SubmitterRow, data: bytes, limits: BundleLimits | None = None, sandbox: str = "bwrap"
) -> str:
    """Validate bundle bytes and store them; return the new submission id or raise LeaderboardError."""
    bundle = read_bundle(data, limits)
    m = bundle.manifest
    suite = _registered(store, m)
    _check_complete(bundle, suite)
    if m.pass_threshold != suite.pass_threshold:
        raise LeaderboardError(f"manifest pass_threshold {m.pass_threshold} differs from the suite's {suite.pass_threshold}")
    sessions = {a.session_id for a in bundle.attempts}
    stray = sorted(set(bundle.captures) - sessions)
    if stray:
        raise LeaderboardError(f"captures/{stray[0]}.jsonl belongs to no attempt in the bundle")
    claimed = [a.model_copy(update={"category": suite.categories.get(a.task_id, a.category)}) for a in bundle.attempts]
    for a in claimed:
        if a.status == "passed" and not is_pass(a, suite.pass_threshold):
            raise LeaderboardError(
                f"attempt ({a.task_id}, {a.harness}, {a.attempt}) says passed but its score {a.score} is below "
                f"the pass threshold {suite.pass_threshold}"
            )
        if not bundle.workspaces and a.subscores and a.score > max(a.subscores.values()) + 1e-9:
            # a score is a weighted mean of verifier scores, each a mean of its sub-scores: never above the largest
            # (checked when self-reported; a re-graded bundle's claims are replaced and their disagreement shown)
            raise LeaderboardError(
                f"attempt ({a.task_id}, {a.harness}, {a.attempt}) claims score {a.score} but its sub-scores are at "
                f"most {max(a.subscores.values())}; the verifier cannot have given that"
            )
    claimed_metrics = compute_metrics(claimed, suite.pass_threshold).to_dict()
    _check_summary(bundle.summary, claimed_metrics)
    digest = results_digest(m, claimed)
    earlier = store.submission_with_results(m.suite, m.suite_hash, digest)
    if earlier is not None:  # cheap early refusal; the unique key below is what guarantees it
        raise LeaderboardError(f"these results were already submitted (submission {earlier})")
    verdicts = regrade_bundle(suite, bundle, claimed, sandbox) if bundle.workspaces else None
    ranked = claimed if verdicts is None else [_as_graded(a, verdicts[(a.task_id, a.harness, a.attempt)], suite) for a in claimed]
    row = SubmissionRow(
        id=uuid.uuid4().hex[:12],
        suite=m.suite,
        suite_hash=m.suite_hash,
        run_id=m.run_id,
        model=m.model,
        harnesses=m.harnesses,
        attempts_per_task=m.attempts,
        submitter_id=submitter.id,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),  # ties list first come first
        bundle_sha256=hashlib.sha256(data).hexdigest(),
        results_sha256=digest,
        has_captures=bool(bundle.captures),
        evaluation_only=m.evaluation_only,
        trust="self-reported" if verdicts is None else "re-graded",
        metrics=ranking_metrics(ranked, suite.pass_threshold),
        claimed_metrics=None if verdicts is None else claimed_metrics,
        manifest=m.model_dump(mode="json"),
    )
    row.attempts = [
        AttemptRow(
            task_id=c.task_id,
            harness=c.harness,
            attempt=c.attempt,
            category=c.category,
            session_id=c.session_id,
            status=r.status,
            passed=is_pass(r, suite.pass_threshold),
            score=r.score,
            claimed_score=c.score,
            claimed_passed=is_pass(c, suite.pass_threshold),
            record=c.model_dump(mode="json"),
            regrade=None if verdicts is None else verdicts[(c.task_id, c.harness, c.attempt)].as_json(),
        )
        for c, r in zip(claimed, ranked, strict=True)
    ]
    row.disagreements = sum(a.disagrees for a in row.attempts)
    captures = [CaptureRow(submission_id=row.id, session_id=k, jsonl=v.decode("utf-8", "replace")) for k, v in bundle.captures.items()]
    try:
        with store.session.begin() as s:
            s.add(row)
            s.flush()
            s.add_all(captures)
    except IntegrityError:
        earlier = store.submission_with_results(m.suite, m.suite_hash, digest)
        raise LeaderboardError(f"these results were already submitted (submission {earlier or 'just now'})") from None
    return row.id


def results_digest(m: SubmittedManifest, attempts: list[SubmittedAttempt]) -> str:
    """What identifies a result set: everything measured, not the run's name, dates, session ids or timings."""
    manifest = m.model_dump(mode="json", exclude={"run_id", "created_at", "machine"})
    records = sorted(
        (a.model_dump(mode="json", exclude={"session_id", "started_at", "finished_at", "timings"}) for a in attempts),
        key=lambda r: (r["task_id"], r["harness"], r["attempt"]),
    )
    return hashlib.sha256(json.dumps([manifest, records], sort_keys=True).encode()).hexdigest()


def ranking_metrics(attempts: list[SubmittedAttempt], pass_threshold: float) -> dict[str, Any]:
    """``compute_metrics`` plus per-category figures for each harness (what the board ranks by)."""
    metrics = compute_metrics(attempts, pass_threshold).to_dict()
    by_h: dict[str, list[SubmittedAttempt]] = {}
    for a in attempts:
        by_h.setdefault(a.harness, []).append(a)
    metrics["per_harness_category"] = {
        h: {
            c: {"pass_rate": g.pass_rate, "mean_score": g.mean_score, "passed": g.passed, "attempts": g.attempts}
            for c, g in compute_metrics(group, pass_threshold).per_category.items()
        }
        for h, group in sorted(by_h.items())
    }
    return metrics


def _as_graded(a: SubmittedAttempt, v: Verdict, suite: SuiteRow) -> SubmittedAttempt:
    """The attempt as the server graded it: its score and sub-scores; pass/fail status follows the score."""
    status = a.status
    if status in ("passed", "failed"):
        status = "passed" if v.score >= suite.pass_threshold else "failed"
    return a.model_copy(update={"score": v.score, "subscores": v.subscores, "status": status})


def _registered(store: Store, m: SubmittedManifest) -> SuiteRow:
    suite = store.suite(m.suite, m.suite_hash)
    if suite is not None:
        return suite
    known = store.suite_names()
    if m.suite not in known:
        raise LeaderboardError(f"unknown suite {m.suite!r}; this leaderboard accepts: {', '.join(known) or 'none yet'}")
    raise LeaderboardError(
        f"suite {m.suite!r} content hash {m.suite_hash.rpartition(':')[2][:16]}... is not a registered version; "
        "re-run against the published suite"
    )


def _check_complete(bundle: Bundle, suite: SuiteRow) -> None:
    m = bundle.manifest
    if sorted(m.task_ids) != sorted(suite.task_ids):
        missing = sorted(set(suite.task_ids) - set(m.task_ids))
        extra = sorted(set(m.task_ids) - set(suite.task_ids))
        what = f"missing task {missing[0]!r}" if missing else f"unknown task {extra[0]!r}"
        raise LeaderboardError(f"manifest task_ids do not match suite {m.suite}: {what} (the whole suite is required)")
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


def _check_summary(claimed: dict[str, Any] | None, recomputed: dict[str, Any]) -> None:
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
        try:
            agrees = real is not None and abs(float(said) - float(real)) <= 1e-9
        except (TypeError, ValueError):
            raise LeaderboardError(f"summary.json: {what} is {said!r}, not a number") from None
        if not agrees:
            raise LeaderboardError(f"summary.json claims {what} = {said}, but the attempts give {real}")
