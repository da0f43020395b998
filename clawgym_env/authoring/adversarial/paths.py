"""What an instruction asks the agent to write: files, extension-less names and folders, not name patterns.

Gaming attempts are only as good as the outputs they aim at: a grader that reads a folder, a
``VERSION`` file or ``output/reminders/<invoice>.txt`` must be played against there. A name
pattern such as ``backup_YYYY-MM-DD.tar`` describes names, it is not a file to write; where a
pattern sits in a folder (``output/redacted/<same file name>``) the folder is an output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Mentions", "find_mentions"]

_ATOM = r"(?:[\w.*+-]|<[^<>\n]{1,40}>|\{[^{}\n]{1,40}\})+"
_PATH_RE = re.compile(rf"(?<![\w.~$<>{{}}-])(/?{_ATOM}(?:/{_ATOM})*/?)")
_EXT_RE = re.compile(r"[\w-]*\w\.[A-Za-z][A-Za-z0-9]{0,5}")
_NOT_FILES = {"e.g", "i.e", "etc", "vs", "a.m", "p.m", "n/a", "and/or", "w/o", "a/b", "i/o", "km/h"}
_PLACEHOLDER_RE = re.compile(r"[<>{}*]|(?<![A-Za-z])(?:YYYY|YY|MM|DD|HH|hh|mm|ss|N{2,}|X{3,}|x{3,}|#{2,})(?![a-z])")
_OUTPUT_ROOTS = {
    "output",
    "outputs",
    "out",
    "results",
    "result",
    "reports",
    "report",
    "build",
    "dist",
    "scripts",
    "bin",
    "src",
    "artifacts",
    "deliverables",
    "tests",
}


@dataclass(frozen=True)
class Mentions:
    """Paths an instruction names, workspace-relative, each list in order of first mention."""

    files: list[str]
    """Names of files (with an extension, or extension-less under a folder), existing or not."""
    folders: list[str]
    """Folders: written with a trailing slash, or holding a name pattern (``output/redacted/<name>``)."""
    patterns: list[str]
    """Name patterns (``backup_YYYY-MM-DD.tar``, ``output/reminders/<invoice>.txt``): never files to write."""


def _relative(raw: str, mount: str) -> str | None:
    path = raw.rstrip(".,;:")
    mount = mount.strip("/")
    if path.startswith("/"):
        if not path.startswith(f"/{mount}/"):
            return None  # an absolute path outside the workspace
        path = path[len(mount) + 2 :]
    elif path.startswith(mount + "/"):
        path = path[len(mount) + 1 :]
    return path.removeprefix("./") or None


def _is_pattern(path: str) -> bool:
    return bool(_PLACEHOLDER_RE.search(path))


def find_mentions(instruction: str, mount: str, existing: set[str], existing_dirs: set[str]) -> Mentions:
    """Files, folders and name patterns ``instruction`` names. ``existing`` holds the starting workspace's
    files and ``existing_dirs`` its folders, so an extension-less name is taken only where it is plausibly a path."""
    files: list[str] = []
    folders: list[str] = []
    patterns: list[str] = []
    candidates = [p for m in _PATH_RE.finditer(instruction) if (p := _relative(m.group(1), mount)) is not None]
    roots = {p.split("/", 1)[0] for p in candidates if "/" in p.rstrip("/") and _EXT_RE.fullmatch(p.rsplit("/", 1)[-1])}
    roots |= {p.split("/", 1)[0] for p in existing | existing_dirs}
    by_name: dict[str, list[str]] = {}
    for p in sorted(existing):
        by_name.setdefault(p.rsplit("/", 1)[-1], []).append(p)

    def add(items: list[str], path: str) -> None:
        if path and path not in items:
            items.append(path)

    for path in candidates:
        bare = path.rstrip("/")
        if bare.lower() in _NOT_FILES or re.fullmatch(r"[\d./:+-]+", bare) or not re.search(r"[A-Za-z]", bare):
            continue
        if "/" not in bare and bare not in existing and len(by_name.get(bare, [])) == 1:
            bare = path = by_name[bare][0]  # "users.csv" for data/users.csv, named before in full
        parts = bare.split("/")
        if _is_pattern(bare):
            add(patterns, bare)
            fixed = []
            for part in parts[:-1]:
                if _is_pattern(part):
                    break
                fixed.append(part)
            # "<file name>", "{id}", "*": files chosen by the data go in that folder (a date format only names one)
            if fixed and re.search(r"[<{*]", parts[-1]) and (fixed[0] in roots or fixed[0] in _OUTPUT_ROOTS):
                add(folders, "/".join(fixed))
            continue
        if bare in existing_dirs or (
            path.endswith("/") and all(len(x) > 1 for x in parts) and (parts[0] in roots or parts[0] in _OUTPUT_ROOTS)
        ):
            add(folders, bare)
        elif _EXT_RE.fullmatch(parts[-1]) and all(p not in ("", ".", "..") for p in parts):
            add(files, bare)
        elif bare in existing:
            add(files, bare)  # an existing extension-less file or folder (VERSION, input/inbox)
        elif len(parts) > 1 and (parts[0] in roots or parts[0] in _OUTPUT_ROOTS) and all(len(x) > 1 for x in parts):
            add(files, bare)  # output/report, scripts/cleanup
    # a name something else lies under is a folder ("output/src" beside "output/src/app/main.py")
    inside = [f for f in files if any(p.startswith(f + "/") for p in [*files, *folders, *patterns])]
    return Mentions([f for f in files if f not in inside], folders + [f for f in inside if f not in folders], patterns)
