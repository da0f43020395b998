"""The outputs the grader reads, found the way the grader sees them: what the reference solution writes.

``tasks check`` runs the reference solution in a sandbox; right after it, ``snapshot`` lists the
workspace there (paths, kinds, hashes, the text of small files) and ``reference_outputs`` diffs
that against the task's starting workspace on the host. Every file or folder the solution created
or changed becomes a ``ReferenceOutput`` holding its path and the substance-free forms of its text
(``shape``); the text itself is dropped there, so no gaming attempt is built from the solution.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from clawgym_env.authoring.adversarial.shape import (
    Faker,
    fake,
    hollow,
    input_pool,
    no_rows,
    tokens_of,
    words_of,
)

if TYPE_CHECKING:
    from clawgym_env.sandbox.base import Sandbox
    from clawgym_env.task.spec import TaskSpec

__all__ = ["ReferenceOutput", "reference_outputs", "snapshot"]

_MAX_ENTRIES = 2000
_MAX_TEXT = 64_000
_MAX_TOTAL = 1_000_000
_SKIP_DIRS = ("__pycache__", ".pytest_cache", ".mypy_cache", ".git")
_SNAPSHOT = f"""
import hashlib, json, os
out, total = {{}}, 0
for dirpath, dirnames, filenames in os.walk("."):
    dirnames[:] = sorted(d for d in dirnames if d not in {_SKIP_DIRS!r})
    rel = os.path.relpath(dirpath, ".")
    if rel != ".":
        out[rel] = {{"kind": "dir"}}
    for name in sorted(filenames):
        path = os.path.join(dirpath, name)
        if len(out) >= {_MAX_ENTRIES} or name.endswith(".pyc") or os.path.islink(path) or not os.path.isfile(path):
            continue
        digest, size, head = hashlib.sha256(), 0, b""
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
                head = head or chunk[:{_MAX_TEXT + 1}]
        entry = {{"kind": "file", "sha256": digest.hexdigest()}}
        if size <= {_MAX_TEXT} and total + size <= {_MAX_TOTAL}:
            try:
                entry["text"] = head.decode("utf-8")
                total += size
            except UnicodeDecodeError:
                pass
        out[os.path.relpath(path, ".")] = entry
print(json.dumps(out))
"""
"""Run with python3 in the workspace after the solution: every path there, its kind, sha256 and (small) text."""


@dataclass(frozen=True)
class ReferenceOutput:
    """A file or folder the reference solution created or changed, with its text reduced to shapes."""

    path: str
    """Workspace-relative."""
    kind: Literal["file", "dir"]
    created: bool
    """False: a starting file the solution changed (edited in place)."""
    no_rows: str | None = None
    """The structure with no records (``shape.no_rows``); None for folders, code and binary files."""
    hollow: str | None = None
    """Every record kept, no text in it (``shape.hollow``)."""
    fake: str | None = None
    """Same format, every value invented (``shape.fake``)."""
    fake_from_inputs: str | None = None
    """Same format, every value swapped for another of its kind taken from the inputs."""


async def snapshot(sb: Sandbox, spec: TaskSpec) -> dict[str, dict[str, str]]:
    """The workspace in ``sb`` as ``{path: {"kind", "sha256", "text"?}}``; {} when it cannot be listed."""
    res = await sb.exec(["python3", "-c", _SNAPSHOT], cwd=spec.workspace_mount, timeout=60, max_output_bytes=4 * _MAX_TOTAL)
    if res.return_code != 0 or res.timed_out:
        return {}
    try:
        listing = json.loads(res.stdout)
    except ValueError:
        return {}
    return listing if isinstance(listing, dict) else {}


def _starting(spec: TaskSpec) -> tuple[dict[str, str], set[str], str]:
    """The starting workspace: file -> sha256, its folders, and the text of its small files (for value pools)."""
    files: dict[str, str] = {}
    dirs: set[str] = set()
    texts: list[str] = []
    root = spec.workspace_dir
    if root is None or not root.is_dir():
        return files, dirs, ""
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            continue
        if p.is_dir():
            dirs.add(rel)
        elif p.is_file():
            data = p.read_bytes()
            files[rel] = hashlib.sha256(data).hexdigest()
            if len(data) <= _MAX_TEXT:
                texts.append(data.decode("utf-8", errors="ignore"))
    return files, dirs, "\n".join(texts)


def reference_outputs(spec: TaskSpec, listing: dict[str, dict[str, str]]) -> tuple[ReferenceOutput, ...]:
    """What the solution left in ``listing`` (from ``snapshot``) that differs from the task's starting workspace."""
    files, dirs, inputs_text = _starting(spec)
    keep = words_of(spec.instruction)
    invent, pool = Faker(keep), input_pool(inputs_text)
    out: list[ReferenceOutput] = []
    for path, entry in sorted(listing.items()):
        if not isinstance(entry, dict) or Path(path).is_absolute() or ".." in Path(path).parts:
            continue
        if entry.get("kind") == "dir":
            if path not in dirs:
                out.append(ReferenceOutput(path, "dir", created=True))
            continue
        if files.get(path) == entry.get("sha256"):
            continue
        text = entry.get("text")
        if not isinstance(text, str):
            out.append(ReferenceOutput(path, "file", created=path not in files))
            continue
        out.append(
            ReferenceOutput(
                path,
                "file",
                created=path not in files,
                no_rows=no_rows(path, text, keep),
                hollow=hollow(path, text, keep),
                fake=fake(path, text, invent),
                fake_from_inputs=fake(path, text, Faker(keep, pool, tokens_of(text))),
            )
        )
    return tuple(out)
