"""The results format of `clawgym bench run`, read by reports and the leaderboard.

A results folder::

    manifest.json                 RunManifest
    attempts/<task>__<harness>__<k>.json   AttemptResult, one per attempt (written atomically)
    captures/<session_id>.jsonl   CallRecord lines (capture/delta.py: read them with read_capture)
    workspaces/<session_id>/      final workspaces (optional)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AttemptResult", "AttemptStatus", "RunManifest", "attempt_filename"]

AttemptStatus = Literal["passed", "failed", "error", "timeout", "truncated"]


class RunManifest(BaseModel):
    """What ran: enough to reproduce it and to tell runs apart."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    created_at: str = Field(description="ISO-8601 UTC.")
    clawgym_version: str
    suite: str
    suite_hash: str = Field(description="Content hash of the suite folder (tasks, workspaces, verifiers).")
    task_ids: list[str] = Field(description="Tasks selected for this run, in order.")
    harnesses: dict[str, str] = Field(description="Harness name -> version.")
    model: str = Field(description="Model spec as given, e.g. hf:./model, vllm:URL.")
    model_info: dict[str, Any] = Field(default_factory=dict)
    attempts: int = Field(description="Attempts per (task, harness): k.")
    sampling: dict[str, Any] = Field(default_factory=dict, description="temperature, top_p, max_tokens, seed.")
    pass_threshold: float = Field(default=1.0, description="Score at or above which an attempt passes.")
    sandbox: str = "bwrap"
    executor: str = "local"
    machine: dict[str, Any] = Field(default_factory=dict)
    evaluation_only: bool = Field(default=False, description="True for API models without token ids.")


class AttemptResult(BaseModel):
    """One attempt of one task through one harness."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    harness: str
    attempt: int
    category: str = ""
    status: AttemptStatus
    score: float = Field(ge=0.0, le=1.0)
    subscores: dict[str, float] = Field(default_factory=dict)
    verifier_output: str = ""
    error: str | None = None
    episode_status: str = Field(
        default="",
        description="How the episode itself ended (completed, crashed, ...); "
        "'crashed' is stored as status 'error' but trainers tell them apart.",
    )
    limit_hit: str | None = Field(
        default=None,
        description="memory, pids or output: the sandbox limit that stopped a crashed episode (trainers take its verdict, not a mask).",
    )
    session_id: str = ""
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: dict[str, float] = Field(default_factory=dict, description="sandbox, harness, model, verifier, total (s).")
    egress_attempts: list[str] = Field(default_factory=list, description="Network targets tried besides the model proxy (all refused).")
    started_at: str = ""
    finished_at: str = ""
    notes: list[str] = Field(
        default_factory=list, description="What was done to the attempt's output, e.g. special files left out of the saved workspace."
    )


def attempt_filename(task_id: str, harness: str, attempt: int) -> str:
    """File name of an attempt's JSON; task ids may contain '/'."""
    return f"{task_id.replace('/', '--')}__{harness}__{attempt}.json"
