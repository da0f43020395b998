"""Submission bundles: a results folder packed for the leaderboard, and the safe way to read one.

A bundle is a gzipped tar holding exactly ``manifest.json``, ``attempts/*.json``, ``summary.json``
(the metrics as the submitter computed them; a server recomputes and compares) and, optionally,
``captures/*.jsonl``. Reading never trusts the archive: links, absolute paths, ``..``, unknown
members and oversized contents are refused before anything is extracted (nothing is written to
disk at all; members are read into memory within the size limits).
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clawgym_env.errors import ConfigError, LeaderboardError
from clawgym_env.metrics import compute_metrics
from clawgym_env.results import AttemptResult, RunManifest

__all__ = ["Bundle", "BundleLimits", "make_bundle", "read_bundle"]

_MEMBER = re.compile(r"^(manifest\.json|summary\.json|attempts/[A-Za-z0-9_.\-]+\.json|captures/[A-Za-z0-9_.\-]+\.jsonl)$")


@dataclass(frozen=True)
class BundleLimits:
    """Upper bounds a reader enforces, so one submission cannot exhaust the server."""

    max_compressed_bytes: int = 64 * 1024 * 1024
    max_uncompressed_bytes: int = 512 * 1024 * 1024
    max_members: int = 50_000


@dataclass
class Bundle:
    """A parsed, validated bundle."""

    manifest: RunManifest
    attempts: list[AttemptResult]
    summary: dict[str, Any] | None = None
    """Metrics as the submitter computed them (``Metrics.to_dict()``); never trusted."""
    captures: dict[str, bytes] = field(default_factory=dict)
    """session id -> JSONL bytes."""


def make_bundle(results_dir: Path, *, include_captures: bool = True) -> bytes:
    """Pack a results folder into bundle bytes (gzipped tar)."""
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
    return buf.getvalue()


def read_bundle(data: bytes, limits: BundleLimits | None = None) -> Bundle:
    """Parse bundle bytes; raise LeaderboardError naming the first problem found."""
    limits = limits or BundleLimits()
    if len(data) > limits.max_compressed_bytes:
        raise LeaderboardError(f"bundle is {len(data)} bytes; the limit is {limits.max_compressed_bytes}")
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
        members = tar.getmembers()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise LeaderboardError(f"bundle is not a gzipped tar archive: {exc}") from None
    if len(members) > limits.max_members:
        raise LeaderboardError(f"bundle has {len(members)} members; the limit is {limits.max_members}")
    total = 0
    files: dict[str, bytes] = {}
    for m in members:
        if not m.isfile():
            raise LeaderboardError(f"bundle member {m.name!r} is not a regular file (links and devices are refused)")
        if not _MEMBER.match(m.name):
            raise LeaderboardError(
                f"bundle member {m.name!r} is not allowed: only manifest.json, attempts/*.json, captures/*.jsonl"
            )
        total += m.size
        if total > limits.max_uncompressed_bytes:
            raise LeaderboardError(f"bundle unpacks to more than {limits.max_uncompressed_bytes} bytes")
        if m.name in files:
            raise LeaderboardError(f"bundle member {m.name!r} appears twice")
        fh = tar.extractfile(m)
        files[m.name] = fh.read() if fh else b""
    if "manifest.json" not in files:
        raise LeaderboardError("bundle has no manifest.json")
    manifest = _parse(RunManifest, files.pop("manifest.json"), "manifest.json")
    summary = None
    if "summary.json" in files:
        try:
            summary = json.loads(files.pop("summary.json"))
        except ValueError:
            raise LeaderboardError("bundle member summary.json is not valid JSON") from None
    attempts = [_parse(AttemptResult, raw, name) for name, raw in sorted(files.items()) if name.startswith("attempts/")]
    captures = {name[len("captures/") : -len(".jsonl")]: raw for name, raw in files.items() if name.startswith("captures/")}
    return Bundle(manifest=manifest, attempts=attempts, summary=summary, captures=captures)


def _parse(model: Any, raw: bytes, name: str) -> Any:
    try:
        return model.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()
        detail = " ".join(first[:3])
        raise LeaderboardError(f"bundle member {name}: invalid {model.__name__}: {detail}") from None
