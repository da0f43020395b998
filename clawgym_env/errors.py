"""Every error ClawGym raises, under one root so callers can choose how broadly to catch.

ClawGymError
├── ConfigError            bad user input: a spec, a flag, a results folder (names file, field, fix)
├── TaskError
│   ├── TaskSpecError      a task or suite file fails validation
│   ├── TaskNotFound       an unknown task or suite id ("did you mean ...")
│   └── VerifierError      a verifier could not run at all (a score of 0 is not an error)
├── SandboxError
│   ├── SandboxStartError  a backend could not create the sandbox
│   ├── SandboxExecError   a process could not be started inside it
│   └── SandboxTimeout     a process outlived its wall-clock limit
├── HarnessError
│   ├── HarnessInstallError
│   └── HarnessExitError   the harness exited abnormally
├── ProxyError
│   ├── PolicyBackendError the policy backend failed to answer
│   └── UpstreamTimeout    the policy backend took too long
├── CaptureError           a capture file is missing or corrupt
├── TreeError              captured calls cannot form a prefix tree
├── RunError               a benchmark run or results folder is inconsistent
└── LeaderboardError       a submission is refused (carries the reason)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = [
    "CaptureError",
    "ClawGymError",
    "ConfigError",
    "HarnessError",
    "HarnessExitError",
    "HarnessInstallError",
    "LeaderboardError",
    "PolicyBackendError",
    "PromptTooLong",
    "ProxyError",
    "RunError",
    "SandboxError",
    "SandboxExecError",
    "SandboxStartError",
    "SandboxTimeout",
    "TaskError",
    "TaskNotFound",
    "ImportInvalidError",
    "TaskSpecError",
    "TreeError",
    "UpstreamTimeout",
    "VerifierError",
    "episode_context",
]


class ClawGymError(Exception):
    """Root of every ClawGym error; carries the episode it happened in, when known."""

    task_id: str | None = None
    session_id: str | None = None

    def __str__(self) -> str:
        msg = Exception.__str__(self)  # not KeyError's, which quotes the message
        where = ", ".join(f"{k}={v}" for k, v in (("task", self.task_id), ("session", self.session_id)) if v)
        return f"{msg} [{where}]" if where else msg


class ConfigError(ClawGymError):
    """Raised for bad user input; the message names the file, the field and the fix."""


class TaskError(ClawGymError):
    """Raised for problems with tasks and suites."""


class ImportInvalidError(ConfigError):
    """A dataset being imported holds invalid tasks (each listed with its source file and reason)."""


class TaskSpecError(TaskError, ConfigError):
    """Raised when a task or suite file fails validation."""


class TaskNotFound(TaskError, KeyError):
    """Raised when a task or suite id is unknown; the message suggests the closest one."""


class VerifierError(TaskError):
    """Raised when a verifier cannot run at all (a failing agent scores 0 instead)."""


class SandboxError(ClawGymError):
    """Raised for sandbox failures."""


class SandboxStartError(SandboxError):
    """Raised when a sandbox backend cannot create a sandbox; says why and how to fix it."""


class SandboxExecError(SandboxError):
    """Raised when a process cannot be started inside a sandbox."""


class SandboxTimeout(SandboxError):
    """Raised when a process in a sandbox outlives its wall-clock limit (it has been killed)."""


class HarnessError(ClawGymError):
    """Raised for harness problems."""


class HarnessInstallError(HarnessError):
    """Raised when a harness cannot be installed or is not installed."""


class HarnessExitError(HarnessError):
    """Raised when a harness exits abnormally."""


class ProxyError(ClawGymError):
    """Raised for model-proxy problems."""


class PolicyBackendError(ProxyError):
    """Raised when the policy backend fails to answer a call."""


class PromptTooLong(PolicyBackendError):
    """The prompt does not fit the policy's context. The history the policy built did that (its own
    tool calls and outputs), so the harness gets a 400 like a real API's context-length error and the
    episode ends as the harness handles it: never as an infrastructure error, which training leaves out."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"prompt is too long: {tokens} tokens > {limit - 1} maximum")
        self.tokens, self.limit = tokens, limit


class UpstreamTimeout(ProxyError):
    """Raised when the policy backend takes longer than its timeout."""


class CaptureError(ClawGymError):
    """Raised when a capture file is missing or corrupt."""


class TreeError(ClawGymError):
    """Raised when captured calls cannot form a prefix tree."""


class RunError(ClawGymError):
    """Raised when a benchmark run or its results folder is inconsistent."""


class LeaderboardError(ClawGymError):
    """Raised when a leaderboard submission is refused; the message is the reason."""


@contextlib.contextmanager
def episode_context(task_id: str | None = None, session_id: str | None = None) -> Iterator[None]:
    """Attach the episode's ids to any ClawGymError raised inside the block."""
    try:
        yield
    except ClawGymError as exc:
        exc.task_id = exc.task_id or task_id
        exc.session_id = exc.session_id or session_id
        raise
