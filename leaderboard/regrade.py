"""Re-grading a submission: the server runs each task's hidden verifier on the submitted final workspace.

A bundle that carries final workspaces (``bench run --save-workspaces``) is not ranked by the
scores it reports but by the ones the server's own verifiers give, in the server's own
sandboxes, with the server's copy of the suite (the only place its hidden files need to be).
The submitted scores are kept next to them so a disagreement is shown, not hidden.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawgym_env._sync import run_sync
from clawgym_env.bundle import Bundle, SubmittedAttempt
from clawgym_env.capture.records import CallRecord
from clawgym_env.capture.store import iter_capture
from clawgym_env.errors import ClawGymError, LeaderboardError
from clawgym_env.grading.grade import grade_workspace
from clawgym_env.results import attempt_filename
from clawgym_env.task import Suite, TaskSpec, load_suite
from leaderboard.store import SuiteRow

__all__ = ["Verdict", "regrade_bundle", "server_suite"]

_MAX_PARALLEL = 2


@dataclass
class Verdict:
    """The server's grading of one attempt."""

    score: float
    subscores: dict[str, float]
    output: str
    errors: dict[str, str]

    def as_json(self) -> dict[str, Any]:
        return {"score": self.score, "subscores": self.subscores, "output": self.output, "errors": self.errors}


def server_suite(row: SuiteRow) -> Suite:
    """The server's copy of a registered suite version; refused when it is missing or has changed."""
    if not row.source_dir:
        raise LeaderboardError(
            f"suite {row.name} {row.version} was registered without its folder, so this server cannot re-grade "
            "workspaces; submit without them (`--no-workspaces`) or ask the admin to run `clawgym leaderboard add-suite`"
        )
    try:
        suite = load_suite(row.source_dir)
    except ClawGymError as exc:
        raise LeaderboardError(f"this server's copy of suite {row.name} cannot be loaded: {exc}") from None
    if suite.content_hash != row.content_hash:
        raise LeaderboardError(
            f"this server's copy of suite {row.name} at {row.source_dir} changed since version "
            f"{row.version} was registered; re-grading refused (ask the admin to re-register it)"
        )
    return suite


def regrade_bundle(
    row: SuiteRow, bundle: Bundle, attempts: list[SubmittedAttempt], sandbox: str = "bwrap"
) -> dict[tuple[str, str, int], Verdict]:
    """The server's verdict per (task, harness, attempt) for a bundle that carries final workspaces.

    Every attempt must come with its workspace except those that ended in ``error`` (an error
    never passes; it scores 0 here).
    """
    suite = server_suite(row)
    specs = {t.full_id: t for t in suite.tasks}
    missing = [
        a for a in attempts if attempt_filename(a.task_id, a.harness, a.attempt)[:-5] not in bundle.workspaces and a.status != "error"
    ]
    if missing:
        a = missing[0]
        raise LeaderboardError(
            f"bundle carries final workspaces for some attempts but not for {attempt_filename(a.task_id, a.harness, a.attempt)} "
            f"({len(missing)} missing); submit every workspace (`bench run --save-workspaces`) or none"
        )
    known = {attempt_filename(a.task_id, a.harness, a.attempt)[:-5] for a in attempts}
    stray = sorted(set(bundle.workspaces) - known)
    if stray:
        raise LeaderboardError(f"workspaces/{stray[0]}/ belongs to no attempt in the bundle")
    return run_sync(_grade_all(specs, bundle, attempts, sandbox))


async def _grade_all(
    specs: dict[str, TaskSpec], bundle: Bundle, attempts: list[SubmittedAttempt], sandbox: str
) -> dict[tuple[str, str, int], Verdict]:
    gate = asyncio.Semaphore(_MAX_PARALLEL)

    async def one(a: SubmittedAttempt) -> tuple[tuple[str, str, int], Verdict]:
        key = (a.task_id, a.harness, a.attempt)
        files = bundle.workspaces.get(attempt_filename(*key)[:-5])
        if files is None:
            return key, Verdict(0.0, {}, "", {"run": "the attempt ended in an error and left no workspace"})
        spec = specs[a.task_id]
        async with gate:
            with tempfile.TemporaryDirectory(prefix="clawgym-regrade-") as tmp:
                root = Path(tmp) / "workspace"
                _unpack(files, root)
                try:
                    vr = await grade_workspace(spec, root, _transcript(spec, bundle.captures.get(a.session_id)), backend=sandbox)
                except ClawGymError as exc:
                    raise LeaderboardError(f"re-grading {a.task_id} failed on this server ({exc}); try again later") from None
        return key, Verdict(vr.score, dict(vr.subscores), vr.output, vr.errors)

    return dict(await asyncio.gather(*(one(a) for a in attempts)))


def _unpack(files: dict[str, bytes], root: Path) -> None:
    """Write a workspace's files under ``root`` (names were checked by the bundle reader: no '..', no links)."""
    root.mkdir(parents=True)
    for rel, raw in files.items():
        dest = (root / rel).resolve()
        if not dest.is_relative_to(root.resolve()):
            raise LeaderboardError(f"workspace file {rel!r} leaves its folder")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(raw)


def _transcript(spec: TaskSpec, jsonl: bytes | None) -> dict[str, Any]:
    """What the verifier saw in the run: rebuilt from the attempt's capture (empty without one)."""
    from clawgym_env.episode import transcript_for_verifier

    # a line that gives no record (a torn last line of a crashed run, or one an uploader broke) is left out
    calls = [r for _, r in iter_capture(jsonl or b"", "the attempt's capture") if isinstance(r, CallRecord)]
    return transcript_for_verifier(spec, calls)
