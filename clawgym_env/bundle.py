"""Submission bundles: a results folder packed for the leaderboard, and the safe way to read one.

A bundle is a gzipped tar holding ``manifest.json``, ``attempts/*.json``, ``summary.json`` (the
metrics as the submitter computed them; a server recomputes and compares) and, optionally,
``captures/*.jsonl`` and ``workspaces/<attempt>/...`` (the final workspaces `bench run
--save-workspaces` kept, so a server can re-grade them with its own verifiers).

Reading never trusts the archive. It is decompressed as a stream through a counter
(:mod:`clawgym_env.bundle_stream`) and every member is checked the moment its header arrives,
before its bytes are read: links, sparse files, absolute paths, ``..``, unknown members,
oversized members, too many members and a compression ratio no real results reach are refused
at once, so a gzip bomb costs the server a few milliseconds, not minutes. Nothing is written
to disk; member bytes are held in memory within the limits.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, StringConstraints, ValidationError

from clawgym_env.bundle_stream import BundleLimits, bounded_members
from clawgym_env.errors import ConfigError, LeaderboardError
from clawgym_env.metrics import compute_metrics
from clawgym_env.results import AttemptResult, RunManifest

__all__ = ["Bundle", "BundleLimits", "SubmittedAttempt", "SubmittedManifest", "make_bundle", "read_bundle"]

_FLAT = re.compile(r"^(manifest\.json|summary\.json|attempts/[A-Za-z0-9_.\-]+\.json|captures/[A-Za-z0-9_.\-]+\.jsonl)$")
_WORKSPACE = re.compile(r"^workspaces/([A-Za-z0-9_.\-]+)/(.+)$")
_SAFE_PART = re.compile(r"^[^/\x00-\x1f\x7f]+$")

_Short = Annotated[str, StringConstraints(max_length=64)]
_Id = Annotated[str, StringConstraints(max_length=256)]
_HarnessName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]


class SubmittedManifest(RunManifest):
    """A run manifest as a leaderboard accepts it: every field bounded, so no row can be stretched."""

    run_id: str = Field(max_length=128)
    created_at: str = Field(max_length=40)
    clawgym_version: str = Field(max_length=64)
    suite: str = Field(max_length=128)
    suite_hash: str = Field(max_length=80)
    task_ids: list[_Id] = Field(max_length=20_000)
    harnesses: dict[_HarnessName, _Short] = Field(min_length=1, max_length=16)
    model: str = Field(min_length=1, max_length=200)
    attempts: int = Field(ge=1, le=1000)
    sandbox: str = Field(default="bwrap", max_length=32)
    executor: str = Field(default="local", max_length=32)


class SubmittedAttempt(AttemptResult):
    """One attempt as a leaderboard accepts it (bounded text; session ids usable in file names and URLs)."""

    task_id: str = Field(max_length=256)
    harness: str = Field(max_length=64)
    attempt: int = Field(ge=0, le=999)
    category: str = Field(default="", max_length=64)
    subscores: dict[Annotated[str, StringConstraints(max_length=128)], float] = Field(default_factory=dict, max_length=64)
    verifier_output: str = Field(default="", max_length=40_000)
    error: str | None = Field(default=None, max_length=10_000)
    episode_status: str = Field(default="", max_length=32)
    session_id: str = Field(default="", max_length=128, pattern=r"^[A-Za-z0-9_.\-]*$")
    model_calls: int = Field(default=0, ge=0)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    timings: dict[_Short, float] = Field(default_factory=dict, max_length=32)
    started_at: str = Field(default="", max_length=40)
    finished_at: str = Field(default="", max_length=40)
    notes: list[Annotated[str, StringConstraints(max_length=2000)]] = Field(default_factory=list, max_length=20)


@dataclass
class Bundle:
    """A parsed, validated bundle."""

    manifest: SubmittedManifest
    attempts: list[SubmittedAttempt]
    summary: dict[str, Any] | None = None
    """Metrics as the submitter computed them (``Metrics.to_dict()``); never trusted."""
    captures: dict[str, bytes] = field(default_factory=dict)
    """session id -> JSONL bytes."""
    workspaces: dict[str, dict[str, bytes]] = field(default_factory=dict)
    """attempt file stem (``attempt_filename`` without ``.json``) -> {relative path: bytes}."""


def make_bundle(results_dir: Path, *, include_captures: bool = True, include_workspaces: bool = True) -> bytes:
    """Pack a results folder into bundle bytes (gzipped tar).

    Final workspaces (``workspaces/``, written by ``bench run --save-workspaces``) go in when
    present: with them a server re-grades the run instead of taking its scores on trust.
    Symlinks inside a workspace are left out (a server refuses links).
    """
    results_dir = Path(results_dir)
    manifest = results_dir / "manifest.json"
    if not manifest.is_file():
        raise ConfigError(f"{results_dir}: no manifest.json; point at a folder written by `clawgym bench run`.")
    attempts = sorted((results_dir / "attempts").glob("*.json"))
    if not attempts:
        raise ConfigError(f"{results_dir}/attempts: no attempt results; finish the run (`clawgym bench resume`).")
    run_manifest = _parse(RunManifest, manifest.read_bytes(), "manifest.json")
    records = [_parse(AttemptResult, p.read_bytes(), f"attempts/{p.name}") for p in attempts]
    summary = json.dumps(compute_metrics(records, run_manifest.pass_threshold).to_dict(), indent=1).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(manifest, arcname="manifest.json")
        info = tarfile.TarInfo("summary.json")
        info.size = len(summary)
        tar.addfile(info, io.BytesIO(summary))
        for path in attempts:
            tar.add(path, arcname=f"attempts/{path.name}")
        if include_captures:
            for path in sorted((results_dir / "captures").glob("*.jsonl")):
                tar.add(path, arcname=f"captures/{path.name}")
        if include_workspaces:
            for path in sorted((results_dir / "workspaces").rglob("*")):
                if path.is_file() and not path.is_symlink():
                    tar.add(path, arcname=f"workspaces/{path.relative_to(results_dir / 'workspaces').as_posix()}")
    return buf.getvalue()


def read_bundle(data: bytes, limits: BundleLimits | None = None) -> Bundle:
    """Parse bundle bytes; raise LeaderboardError naming the first problem found."""
    limits = limits or BundleLimits()
    files: dict[str, bytes] = {}
    workspaces: dict[str, dict[str, bytes]] = {}
    for name, read in bounded_members(data, limits, _check_name):
        raw = read()
        if name.startswith("captures/"):
            _check_lines(name, raw, limits.max_capture_line_bytes)
        ws = _WORKSPACE.match(name)
        if ws:
            workspaces.setdefault(ws.group(1), {})[ws.group(2)] = raw
        else:
            files[name] = raw
    if "manifest.json" not in files:
        raise LeaderboardError("bundle has no manifest.json")
    manifest = _parse(SubmittedManifest, files.pop("manifest.json"), "manifest.json")
    summary = None
    if "summary.json" in files:
        try:
            summary = json.loads(files.pop("summary.json"))
        except ValueError:
            raise LeaderboardError("bundle member summary.json is not valid JSON") from None
    attempts = [_parse(SubmittedAttempt, raw, name) for name, raw in sorted(files.items()) if name.startswith("attempts/")]
    captures = {name[len("captures/") : -len(".jsonl")]: raw for name, raw in files.items() if name.startswith("captures/")}
    return Bundle(manifest=manifest, attempts=attempts, summary=summary, captures=captures, workspaces=workspaces)


def _check_name(name: str) -> str | None:
    """Why a member name is refused, or None when it is one a bundle may hold."""
    if _FLAT.match(name):
        return None
    ws = _WORKSPACE.match(name)
    if ws and all(_SAFE_PART.match(p) and p not in (".", "..") for p in [ws.group(1), *ws.group(2).split("/")]):
        return None
    return "only manifest.json, summary.json, attempts/*.json, captures/*.jsonl and workspaces/<attempt>/... are allowed"


def _check_lines(name: str, raw: bytes, limit: int) -> None:
    start = 0
    while start < len(raw):
        end = raw.find(b"\n", start)
        end = len(raw) if end < 0 else end
        if end - start > limit:
            raise LeaderboardError(f"bundle member {name}: a line of {end - start} bytes; the limit per captured call is {limit}")
        start = end + 1


def _parse(model: Any, raw: bytes, name: str) -> Any:
    try:
        return model.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()
        detail = " ".join(first[:3])
        raise LeaderboardError(f"bundle member {name}: invalid {model.__name__}: {detail}") from None
