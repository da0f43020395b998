"""The harness-adapter contract: how to install, configure and launch one unmodified agent CLI.

Adapters live in the top-level ``harnesses/`` package and are loaded by ``"module:Class"``; the
core never imports them. An adapter never parses the harness's logs: the proxy captures every
model call at the boundary.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from clawgym_env.sandbox.base import Mount

__all__ = ["STDOUT_LOG", "Harness", "HarnessSession"]


@dataclass(frozen=True)
class HarnessSession:
    """What an adapter needs to point its CLI at the proxy for one episode."""

    session_id: str
    base_url: str
    """Proxy URL as seen inside the sandbox, e.g. http://127.0.0.1:8787 (no /v1)."""
    api_key: str
    """Per-episode secret; the proxy refuses any other."""
    model: str
    workspace: str
    """Workspace path inside the sandbox (the harness's cwd)."""
    home: str = "/tmp/home"
    max_turns: int | None = None


STDOUT_LOG = "stdout.log"
"""The harness's stdout, kept in an episode's record folder (``<capture_dir>/<session>.harness/``)."""


class Harness(abc.ABC):
    """One agent harness. Subclasses declare ``name``, ``version`` and the four methods."""

    name: ClassVar[str]
    version: ClassVar[str]
    dialect: ClassVar[str] = "openai-chat"
    """API the harness speaks to the model: "anthropic", "openai-chat", "openai-responses" or "gemini"."""
    memory_mb: ClassVar[int] = 0
    """Sandbox memory floor (MB) the harness needs whatever the task asks (0: the task's limit alone)."""
    transcript: ClassVar[str | None] = None
    """Where the harness keeps its own record of an episode: "stdout" (what it prints), a path under HOME (copied
    into the episode's record folder once every process is dead), or None."""

    @abc.abstractmethod
    def install(self, cache_dir: Path) -> Path:
        """Install the pinned version under ``cache_dir`` (idempotent) and return its root."""

    @abc.abstractmethod
    def mounts(self, cache_dir: Path) -> tuple[Mount, ...]:
        """Read-only binds the sandbox needs to run the installed harness."""

    @abc.abstractmethod
    def build_env(self, session: HarnessSession) -> Mapping[str, str]:
        """Environment variables pointing the CLI at the proxy."""

    @abc.abstractmethod
    def build_command(self, instruction: str, session: HarnessSession) -> list[str]:
        """The headless command line for one episode."""

    def write_configs(self, session: HarnessSession) -> dict[str, str]:
        """Files to create inside the sandbox before launch: {absolute path: content}."""
        return {}

    def own_record(self, record: Path) -> Path | None:
        """Where the harness's own record of an episode lies in its record folder ``record``
        (``EpisodeResult.transcript_path``): ``stdout.log``, or the ``transcript`` path without its leading dot."""
        if self.transcript is None:
            return None
        return record / (STDOUT_LOG if self.transcript == "stdout" else self.transcript.lstrip("."))

    def read_own_record(self, record: Path) -> str:
        """The harness's own record (a file) in ``record`` as text; "" when it left none."""
        path = self.own_record(record)
        return path.read_text(encoding="utf-8", errors="replace") if path is not None and path.is_file() else ""

    def count_calls(self, record: Path) -> int | None:
        """Model calls the harness counted itself in an episode's record folder, to hold against the capture;
        None when it keeps no count."""
        return None
