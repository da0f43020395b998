"""Record the sandboxes an episode creates, and check that none of them left anything behind."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clawgym_env import episode as episode_mod
from clawgym_env.grading import grade as grade_mod


@dataclass
class SandboxLog:
    made: list[Any] = field(default_factory=list)
    """Every sandbox an episode made (the agent's and the grading ones), in order."""
    dirs: list[str] = field(default_factory=list)
    """The host folder of each agent sandbox, once started (also set as ``sb.host_dir_for_test``)."""


def spy_on_sandboxes(monkeypatch: pytest.MonkeyPatch) -> SandboxLog:
    """Patch ``episode.create_sandbox`` (and the grading one) so that every sandbox made is recorded in the log."""
    log = SandboxLog()
    real = episode_mod.create_sandbox

    def spy(backend: str, config: Any) -> Any:
        sb = real(backend, config)
        start = sb.start

        async def recording_start() -> None:
            await start()
            sb.host_dir_for_test = str(sb.dir)  # bwrap's per-sandbox host folder
            if not config.sealed:
                log.dirs.append(sb.host_dir_for_test)

        sb.start = recording_start
        log.made.append(sb)
        return sb

    monkeypatch.setattr(episode_mod, "create_sandbox", spy)
    monkeypatch.setattr(grade_mod, "create_sandbox", spy)  # the grading sandboxes too (started early or late)
    return log


def assert_sandbox_dirs_gone(dirs: list[str]) -> None:
    """No folder in ``dirs`` still exists and no running process names one on its command line."""
    for d in dirs:
        assert not os.path.exists(d), f"sandbox folder {d} survived"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        assert not any(d in cmdline for d in dirs), f"process {pid} of the sandbox survived: {cmdline[:200]}"
