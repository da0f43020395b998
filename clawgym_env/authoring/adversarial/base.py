"""What a gaming strategy sees of a task and what it hands back.

A strategy acts as a cheap policy would: it reads the instruction and the starting workspace
(never the hidden files, nor what the reference solution says: only where it writes and the
substance-free shapes of what it writes) and proposes final workspaces (files to write) and
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

from clawgym_env.authoring.adversarial.paths import Mentions, find_mentions
from clawgym_env.authoring.adversarial.reference import ReferenceOutput
from clawgym_env.task.spec import RubricVerifier, TaskSpec

__all__ = ["Attempt", "Strategy", "TaskView"]

_FILE_RE = re.compile(r"(?:[\w.-]+/)*[\w-]*\w\.[A-Za-z][A-Za-z0-9]{0,5}")
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
    """The task as an agent sees it (the instruction and the starting workspace's text files), plus the
    paths and substance-free shapes of what the reference solution writes (``tasks check`` fills it)."""

    spec: TaskSpec
    reference: tuple[ReferenceOutput, ...] = ()

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
    def _existing(self) -> tuple[set[str], set[str]]:
        root = self.spec.workspace_dir
        if root is None or not root.is_dir():
            return set(), set()
        paths = list(root.rglob("*"))
        return (
            {p.relative_to(root).as_posix() for p in paths if not p.is_dir()},
            {p.relative_to(root).as_posix() for p in paths if p.is_dir()},
        )

    @cached_property
    def mentions(self) -> Mentions:
        """Files, folders and name patterns the instruction names (``paths.find_mentions``)."""
        files, dirs = self._existing
        return find_mentions(self.spec.instruction, self.spec.workspace_mount, files, dirs)

    @cached_property
    def mentioned(self) -> list[str]:
        """File paths the instruction names (relative; with an extension, or existing, or under a folder)."""
        return self.mentions.files

    @cached_property
    def outputs(self) -> list[str]:
        """Files the agent is asked to write: those the instruction names that do not exist yet, every file the
        reference solution creates, and names in the folders the instruction asks for that nothing else fills."""
        files, dirs = self._existing
        out = [p for p in self.mentioned if p not in files and p not in dirs]
        out += [r.path for r in self.reference if r.kind == "file" and r.created and r.path not in out]
        for folder in self.output_dirs:
            if not any(r.path.startswith(folder + "/") for r in self.reference):
                out += [f"{folder}/{name}" for name in self._names_for(folder) if f"{folder}/{name}" not in out]
        return [p for p in out if not any(q.startswith(p + "/") for q in out)]  # a folder is not a file to write

    @cached_property
    def output_dirs(self) -> list[str]:
        """Folders the instruction asks for (a trailing slash, or a name pattern inside) or the solution creates."""
        _, dirs = self._existing
        found = [d for d in self.mentions.folders if d not in dirs]
        return found + [r.path for r in self.reference if r.kind == "dir" and r.created and r.path not in found]

    def _names_for(self, folder: str) -> list[str]:
        """File names for a folder output from the instruction's pattern there: input ids or input file names."""
        pattern = next((p for p in self.mentions.patterns if p.startswith(folder + "/")), None)
        if pattern is None:
            return []
        last = pattern.rsplit("/", 1)[-1]
        suffix = Path(re.sub(r"<[^>]*>|\{[^}]*\}", "x", last)).suffix
        if suffix:
            return [i + suffix for i in self.ids[:3]]
        return list(dict.fromkeys(Path(p).name for p in self.inputs if not p.startswith(folder + "/")))[:3]

    @cached_property
    def changed(self) -> list[str]:
        """Starting files the reference solution edits in place."""
        return [r.path for r in self.reference if r.kind == "file" and not r.created]

    @cached_property
    def targets(self) -> list[str]:
        """Outputs and the files the solution edits, or when there are none, the input files the instruction
        names (edited in place)."""
        return [*self.outputs, *self.changed] or [p for p in self.mentioned if p in self.inputs]

    def reference_for(self, path: str) -> ReferenceOutput | None:
        """What the reference solution left at ``path``, or None."""
        return next((r for r in self.reference if r.path == path), None)

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
        return list(dict.fromkeys(a or b for a, b in found if not _FILE_RE.fullmatch(a or b)))

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

    def variants(self, files_by_tag: dict[str, dict[str, str]]) -> list[Attempt]:
        """One attempt per variant that writes something, labelled ``"<name>:<tag>"``."""
        return [Attempt(f"{self.name}:{tag}", files) for tag, files in files_by_tag.items() if files]
