"""Suites (a folder of tasks with a content hash) and the registry that finds them by id.

A suite is found by name in the repository's ``tasks/`` folder, then in the user's suites
folder (where ``clawgym tasks import`` writes by default), or given as a path. The registry is
an object you pass around, never a global.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from clawgym_env.errors import TaskNotFound, TaskSpecError
from clawgym_env.task.loader import SUITE_FILE, TASK_FILE, load_suite_spec, load_task_dir
from clawgym_env.task.spec import SuiteSpec, TaskSpec

__all__ = [
    "Suite",
    "TaskRegistry",
    "content_hash",
    "load_suite",
    "repo_tasks_dir",
    "resolve_suite_dir",
    "suite_search_path",
    "user_suites_dir",
    "validate_suite",
]


def repo_tasks_dir() -> Path:
    """The ``tasks/`` folder of this checkout (next to the ``clawgym_env`` package)."""
    return Path(__file__).resolve().parents[2] / "tasks"


def user_suites_dir() -> Path:
    """Where imported suites go: $CLAWGYM_SUITES_DIR, else ~/.cache/clawgym/suites (XDG aware)."""
    if env := os.environ.get("CLAWGYM_SUITES_DIR"):
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "clawgym" / "suites"


def suite_search_path() -> list[Path]:
    """Folders searched, in order, for a suite given by name."""
    return [repo_tasks_dir(), user_suites_dir()]


def _known_suites() -> list[str]:
    names: set[str] = set()
    for root in suite_search_path():
        if root.is_dir():
            names.update(p.name for p in root.iterdir() if (p / SUITE_FILE).is_file())
    return sorted(names)


def resolve_suite_dir(name_or_path: str | os.PathLike[str]) -> Path:
    """Find a suite folder by path or by name; unknown names raise TaskNotFound with suggestions."""
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    if path.is_dir() and (path / SUITE_FILE).is_file():
        return path.absolute()
    if "/" not in text and text not in (".", ".."):
        for root in suite_search_path():
            if (root / text / SUITE_FILE).is_file():
                return (root / text).absolute()
    if path.is_dir():
        raise TaskSpecError(f"{path / SUITE_FILE}: missing. Fix: create suite.yaml with `name: {path.name}`.")
    known = _known_suites()
    close = difflib.get_close_matches(text, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    where = ", ".join(str(p) for p in suite_search_path())
    raise TaskNotFound(f"unknown suite {text!r} (searched {where}; known: {', '.join(known) or 'none'}).{hint}")


def _files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            yield Path(dirpath) / name


def content_hash(root: Path) -> str:
    """sha256 over every file of ``root`` (relative path, then bytes), in a stable order."""
    digest = hashlib.sha256()
    for path in sorted(_files(root), key=lambda p: p.relative_to(root).as_posix()):
        rel = path.relative_to(root).as_posix().encode()
        if path.is_symlink():
            body = b"link:" + os.readlink(path).encode()
        else:
            body = path.read_bytes()
        digest.update(len(rel).to_bytes(8, "big") + rel + len(body).to_bytes(8, "big"))
        digest.update(body)
    return "sha256:" + digest.hexdigest()


def _task_dirs(suite_dir: Path) -> list[Path]:
    return sorted(p for p in suite_dir.iterdir() if p.is_dir() and (p / TASK_FILE).is_file())


@dataclass(frozen=True)
class Suite:
    """A loaded suite: its spec, its folder and its tasks (params already expanded)."""

    spec: SuiteSpec
    path: Path
    tasks: list[TaskSpec] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pass_threshold(self) -> float:
        return self.spec.pass_threshold

    @property
    def description(self) -> str:
        return self.spec.description

    @cached_property
    def content_hash(self) -> str:
        """Hash of every file in the suite folder; results record it so they name exactly what ran."""
        return content_hash(self.path)

    def passed(self, score: float) -> bool:
        """The pass rule: an attempt passes iff its score reaches the suite's threshold."""
        return score >= self.pass_threshold

    def select(self, pattern: str | Iterable[str] | None = None) -> list[TaskSpec]:
        """Tasks whose id or full id matches a glob (or any of several); None or "*" selects all."""
        if pattern is None:
            return list(self.tasks)
        patterns = [pattern] if isinstance(pattern, str) else list(pattern)
        return [t for t in self.tasks if any(fnmatch.fnmatchcase(t.id, p) or fnmatch.fnmatchcase(t.full_id, p) for p in patterns)]

    def get(self, task_id: str) -> TaskSpec:
        """One task by id (or full id); TaskNotFound suggests the closest ids."""
        for t in self.tasks:
            if task_id in (t.id, t.full_id):
                return t
        ids = [t.id for t in self.tasks]
        close = difflib.get_close_matches(task_id.split("/")[-1], ids, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise TaskNotFound(f"no task {task_id!r} in suite {self.name!r} ({len(ids)} tasks).{hint}")

    def __len__(self) -> int:
        return len(self.tasks)


def load_suite(name_or_path: str | os.PathLike[str]) -> Suite:
    """Load a suite by name (repo ``tasks/``, then the user suites folder) or by path."""
    suite_dir = resolve_suite_dir(name_or_path)
    spec = load_suite_spec(suite_dir)
    tasks: list[TaskSpec] = []
    for task_dir in _task_dirs(suite_dir):
        tasks.extend(load_task_dir(task_dir, spec.name))
    return Suite(spec=spec, path=suite_dir, tasks=tasks)


def validate_suite(suite_dir: Path) -> tuple[int, list[TaskSpecError]]:
    """Check every task of a suite folder, collecting all errors instead of stopping at the first.

    Returns (number of task specs that loaded, errors).
    """
    errors: list[TaskSpecError] = []
    try:
        spec = load_suite_spec(suite_dir)
    except TaskSpecError as exc:
        errors.append(exc)
        name = suite_dir.name
    else:
        name = spec.name
    count = 0
    for task_dir in _task_dirs(suite_dir):
        try:
            count += len(load_task_dir(task_dir, name))
        except TaskSpecError as exc:
            errors.append(exc)
    return count, errors


class TaskRegistry:
    """Suites by name and tasks by full id, built from folders you choose.

    Suites found by folder are loaded on first use, so looking up one task does not parse
    every suite on the search path.
    """

    def __init__(self, suites: Iterable[Suite] = ()) -> None:
        self._loaded: dict[str, Suite] = {}
        self._dirs: dict[str, Path] = {}
        for s in suites:
            self.add(s)

    def add(self, suite: Suite | Path) -> None:
        """Register a suite or a suite folder (an earlier one of the same name wins, as on a search path)."""
        if isinstance(suite, Suite):
            if suite.name not in self._dirs and suite.name not in self._loaded:
                self._loaded[suite.name] = suite
        elif suite.name not in self._dirs and suite.name not in self._loaded:
            self._dirs[suite.name] = suite

    @classmethod
    def from_dir(cls, root: str | os.PathLike[str]) -> TaskRegistry:
        """Every suite folder (one holding suite.yaml) directly under ``root``."""
        base = Path(root)
        if not base.is_dir():
            raise TaskNotFound(f"tasks folder {base} does not exist.")
        reg = cls()
        for d in sorted(p for p in base.iterdir() if (p / SUITE_FILE).is_file()):
            reg.add(d.absolute())
        return reg

    @classmethod
    def default(cls) -> TaskRegistry:
        """The repo's ``tasks/`` and the user suites folder, in that order."""
        reg = cls()
        for root in suite_search_path():
            if root.is_dir():
                for d in sorted(p for p in root.iterdir() if (p / SUITE_FILE).is_file()):
                    reg.add(d.absolute())
        return reg

    @property
    def names(self) -> list[str]:
        """Every registered suite name (nothing is loaded)."""
        return sorted({*self._loaded, *self._dirs})

    @property
    def suites(self) -> dict[str, Suite]:
        """Every suite, loaded (in name order)."""
        return {name: self.suite(name) for name in self.names}

    @property
    def tasks(self) -> list[TaskSpec]:
        return [t for s in self.suites.values() for t in s.tasks]

    def suite(self, name: str) -> Suite:
        """A suite by name (loaded now if needed); TaskNotFound suggests the closest names."""
        if name in self._loaded:
            return self._loaded[name]
        if name in self._dirs:
            self._loaded[name] = load_suite(self._dirs.pop(name))
            return self._loaded[name]
        close = difflib.get_close_matches(name, self.names, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise TaskNotFound(f"unknown suite {name!r} (known: {', '.join(self.names) or 'none'}).{hint}")

    def get(self, full_id: str) -> TaskSpec:
        """A task by ``suite/id``; a bare id is accepted when it is unique across suites."""
        if "/" in full_id:
            suite, _, task_id = full_id.partition("/")
            return self.suite(suite).get(task_id)
        hits = [t for t in self.tasks if t.id == full_id]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise TaskNotFound(f"task id {full_id!r} is in several suites; use one of {', '.join(t.full_id for t in hits)}.")
        ids = [t.full_id for t in self.tasks]
        close = difflib.get_close_matches(full_id, ids + [i.split("/", 1)[1] for i in ids], n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise TaskNotFound(f"unknown task {full_id!r}.{hint}")

    def select(self, pattern: str) -> list[TaskSpec]:
        """Tasks whose full id or id matches the glob."""
        return [t for t in self.tasks if fnmatch.fnmatchcase(t.full_id, pattern) or fnmatch.fnmatchcase(t.id, pattern)]

    def __contains__(self, full_id: object) -> bool:
        try:
            self.get(str(full_id))
        except TaskNotFound:
            return False
        return True
