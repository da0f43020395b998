"""What a gaming strategy sees of a task and what it hands back.

A strategy acts as a cheap policy would: it reads the instruction and the starting workspace
(never the hidden files or the solution) and proposes final workspaces (files to write) and
final messages. ``clawgym tasks check --adversarial`` plays each proposal through the same
sandbox and ``verify`` path as a real episode.
"""

from __future__ import annotations

import abc
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import ClassVar

from clawgym_env.task.spec import RubricVerifier, TaskSpec

__all__ = ["Attempt", "Strategy", "TaskView"]

_PATH_RE = re.compile(r"(?<![\w/.~$-])((?:[\w.-]+/)*[\w-]*\w\.[A-Za-z][A-Za-z0-9]{0,5})(?![\w/])")
_NOT_FILES = {"e.g", "i.e", "etc", "vs", "a.m", "p.m"}
_NUMBER_RE = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_ID_RE = re.compile(r"\b[A-Za-z]{1,6}[-_]?\d{1,6}\b")
_MAX_FILE = 64_000
_MAX_TOTAL = 400_000


@dataclass(frozen=True)
class Attempt:
    """One gamed final state: files written over the starting workspace, and a final message."""

    label: str
    """Shown in the report, e.g. ``"empty"`` or ``"always-equal:calc.py"``."""
    files: dict[str, str] = field(default_factory=dict)
    """Workspace-relative path -> text written there (folders created as needed; ``.sh``/``.py`` made executable)."""
    final_message: str = ""


@dataclass(frozen=True)
class TaskView:
    """The task as an agent sees it: the instruction and the starting workspace's text files."""

    spec: TaskSpec

    @cached_property
    def inputs(self) -> dict[str, str]:
        """Workspace-relative path -> text of each starting file (binary and oversized files left out)."""
        root = self.spec.workspace_dir
        out: dict[str, str] = {}
        if root is None or not root.is_dir():
            return out
        total = 0
        for p in sorted(root.rglob("*")):
            if not p.is_file() or p.is_symlink() or p.stat().st_size > _MAX_FILE or total > _MAX_TOTAL:
                continue
            try:
                text = p.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            out[p.relative_to(root).as_posix()] = text
            total += len(text)
        return out

    @cached_property
    def mentioned(self) -> list[str]:
        """File paths the instruction names (relative, with an extension), in order of first mention."""
        seen: list[str] = []
        for m in _PATH_RE.finditer(self.spec.instruction):
            path = m.group(1).strip(".").removeprefix("./")
            if path.lower() in _NOT_FILES or re.fullmatch(r"[\d.]+", path) or path in seen:
                continue
            if path.startswith(self.spec.workspace_mount.strip("/") + "/"):
                path = path[len(self.spec.workspace_mount.strip("/")) + 1 :]
            seen.append(path)
        return seen

    @cached_property
    def outputs(self) -> list[str]:
        """Paths the instruction names that do not exist yet: what the agent is asked to write."""
        names = set(self.inputs)
        if self.spec.workspace_dir is not None:
            names |= {p.relative_to(self.spec.workspace_dir).as_posix() for p in self.spec.workspace_dir.rglob("*")}
        return [p for p in self.mentioned if p not in names]

    @cached_property
    def targets(self) -> list[str]:
        """Outputs, or when the instruction names none, the input files it names (edited in place)."""
        return self.outputs or [p for p in self.mentioned if p in self.inputs]

    @cached_property
    def python_files(self) -> list[str]:
        """Python files the agent could hand back: those in the workspace and those it is asked to write."""
        return sorted({*(p for p in self.inputs if p.endswith(".py")), *(p for p in self.outputs if p.endswith(".py"))})

    @cached_property
    def all_text(self) -> str:
        return "\n".join(self.inputs.values())

    @cached_property
    def numbers(self) -> list[str]:
        """Every number in the inputs, most frequent first (ties: first seen)."""
        found = _NUMBER_RE.findall(self.all_text)
        return [n for n, _ in Counter(found).most_common()]

    @cached_property
    def ids(self) -> list[str]:
        """Every id-like token in the inputs (``m01``, ``SKU-42``, ``R019``), in order of first appearance."""
        return list(dict.fromkeys(_ID_RE.findall(self.all_text)))

    @cached_property
    def lines(self) -> list[str]:
        """Every distinct non-empty line of the inputs, in order."""
        return list(dict.fromkeys(ln for ln in self.all_text.splitlines() if ln.strip()))

    @cached_property
    def quoted_keys(self) -> list[str]:
        """Words the instruction quotes ("key" or `key`): likely JSON keys, headers, labels."""
        found = re.findall(r'"([A-Za-z_][\w .-]{0,40})"|`([A-Za-z_][\w.-]{0,40})`', self.spec.instruction)
        return list(dict.fromkeys(a or b for a, b in found if not _PATH_RE.fullmatch(a or b)))

    @cached_property
    def headings(self) -> list[str]:
        """Markdown headings the instruction asks for ("## Summary"), in order."""
        return list(dict.fromkeys(m.strip() for m in re.findall(r"(#{1,4} [^\"`\n]{1,60})[\"`]", self.spec.instruction)))

    @cached_property
    def csv_header(self) -> str | None:
        """A header the instruction spells out (``header a,b,c``), else None."""
        m = re.search(r"header\s*[`\"]?([\w ]+(?:,[\w ]+)+)", self.spec.instruction, flags=re.IGNORECASE)
        return m.group(1).strip() if m else None

    @property
    def has_rubric(self) -> bool:
        return any(isinstance(v, RubricVerifier) for v in self.spec.verifiers)

    def input_like(self, path: str) -> str | None:
        """The starting file most like ``path`` (same suffix first, else the longest), or None."""
        if not self.inputs:
            return None
        suffix = Path(path).suffix
        same = [p for p in self.inputs if Path(p).suffix == suffix]
        return max(same or list(self.inputs), key=lambda p: len(self.inputs[p]))


class Strategy(abc.ABC):
    """One generic way to game a grader. Subclass, set ``name`` and ``tries``, return attempts.

    Return no attempt where the strategy does not apply (no Python files, no rubric...). Keep
    attempts few: each one costs a sandbox and a grading run per task.
    """

    name: ClassVar[str]
    """Short kebab-case name, shown in the report."""
    tries: ClassVar[str]
    """One sentence: what the strategy tries (the README's table is built from these)."""

    @abc.abstractmethod
    def attempts(self, task: TaskView) -> list[Attempt]:
        """The gamed final states to grade for this task."""
