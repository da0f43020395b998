"""ReplayBackend: branch a black-box harness at model call k by replaying calls 0..k-1.

A harness process cannot be forked, but its model calls can be answered again. A fresh
sandbox and harness run the same task; this backend answers call i < k with call i's recorded
completion (the same token ids and logprobs, so the proxy splices the same ids into later
prompts), and from call k on hands every call to the wrapped policy. Built into one forest, the
recorded episode and its branches share calls 0..k-1 token for token and split at call k. A
replayed call is captured with ``token_source="replayed"``: its tokens are the recording's, so a
tree trains them where the recording sampled them and never again for the branch.

Each replayed call is first checked against the recorded request, normalised as the proxy
already normalises (tool-call ids by order of first use, assistant turns by content and calls)
plus what harnesses make volatile between runs (UUIDs, long hex ids, timestamps). A request
that differs is a *divergence*: it is recorded with the first differing message, and then the
episode either branches there instead (``on_divergence="continue"``, the default: the wrapped
policy answers from that call on) or stops (``"stop"``: the call fails, the episode ends).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ConfigError, PolicyBackendError
from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend

__all__ = ["Divergence", "ReplayBackend", "ReplayReport", "normalise_request"]

OnDivergence = Literal["continue", "stop"]

_VOLATILE = [
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}\b"), "<time>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "<date>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b"), "<hex>"),
    (re.compile(r"\b1[5-9]\d{8}(\d{3})?\b"), "<epoch>"),
    (re.compile(r"\b\d+(\.\d+)?\s?(ms|s)\b"), "<duration>"),
]
"""What changes between two runs of the same harness on the same task without meaning anything."""


def _scrub(text: str) -> str:
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return text


def _norm_value(value: Any) -> Any:
    if isinstance(value, str):
        return _scrub(value)
    if isinstance(value, list):
        return [_norm_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm_value(v) for k, v in sorted(value.items())}
    return value


def normalise_request(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> list[Any]:
    """Messages (tools first) in a form two runs of one harness on one task share when nothing meaningful differs."""
    ids: dict[str, str] = {}

    def tid(x: Any) -> str:
        return ids.setdefault(str(x or ""), f"<call{len(ids)}>")

    out: list[Any] = [_norm_value(list(tools))]
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            calls = [
                (tid(c.get("id")), c["function"]["name"], _norm_value(c["function"].get("arguments"))) for c in m.get("tool_calls") or ()
            ]
            out.append(("assistant", _scrub(str(m.get("content") or "").strip()), calls))
        elif role == "tool":
            out.append(("tool", tid(m.get("tool_call_id")), _norm_value(m.get("content"))))
        else:
            out.append((role, _norm_value(m.get("content"))))
    return out


@dataclass(frozen=True)
class Divergence:
    """Where a replayed episode stopped matching its recording."""

    call_index: int
    """The model call whose request differed from the recorded one."""
    message_index: int
    """Index of the first differing message in that request (-1: the tools differ)."""
    recorded: Any
    """That message, normalised, as recorded (None when the new request is longer)."""
    got: Any
    """That message, normalised, as received now (None when the new request is shorter)."""


@dataclass
class ReplayReport:
    """What a replay did; ``reached_branch`` is the fidelity figure ``bench/branch.py`` reports."""

    branch_at: int
    replayed: int = 0
    """Calls answered from the recording."""
    prompt_ids_equal: int = 0
    """Of those, how many had byte-identical prompt ids to the recorded call (token-level backends)."""
    divergence: Divergence | None = None
    handed_over_at: int | None = None
    """The call the wrapped policy answered first (k, or the diverging call)."""
    calls: list[int] = field(default_factory=list)

    @property
    def reached_branch(self) -> bool:
        """Every call before k matched its recording and the policy took over at k."""
        return self.divergence is None and self.handed_over_at == self.branch_at


class ReplayBackend(PolicyBackend):
    """Answers one episode's calls 0..k-1 from a recording, then hands over to ``policy``.

    Args:
        recorded: the recorded episode's calls (a capture; sorted by ``call_index``).
        branch_at: k, the first call the policy answers (0 <= k <= len(recorded)).
        policy: the backend that samples from call k on (shared; this wrapper holds no model).
        on_divergence: "continue" (branch where the requests part) or "stop" (fail that call).
    """

    name = "replay"

    def __init__(
        self, recorded: Sequence[CallRecord], branch_at: int, policy: PolicyBackend, *, on_divergence: OnDivergence = "continue"
    ) -> None:
        calls = sorted(recorded, key=lambda c: c.call_index)
        if not 0 <= branch_at <= len(calls):
            raise ConfigError(f"ReplayBackend: branch_at={branch_at} is outside 0..{len(calls)} (the recording has {len(calls)} calls)")
        bad = [c.call_index for c in calls[:branch_at] if c.error or (c.completion_text is None and not c.completion_ids)]
        if bad:
            raise ConfigError(
                f"ReplayBackend: recorded calls {bad} before branch_at={branch_at} have no completion "
                "to replay; branch at or before the first failed call"
            )
        if on_divergence not in ("continue", "stop"):
            raise ConfigError(f"ReplayBackend: on_divergence must be 'continue' or 'stop', got {on_divergence!r}")
        self.TOKEN_LEVEL = policy.TOKEN_LEVEL  # type: ignore[misc]  # per instance: whatever the policy is
        self.recorded = calls
        self.policy = policy
        self.on_divergence: OnDivergence = on_divergence
        self.report = ReplayReport(branch_at=branch_at)
        self._live = branch_at == 0

    @property
    def tokenizer(self) -> Any | None:
        return self.policy.tokenizer

    @property
    def model_name(self) -> str:
        return self.policy.model_name

    async def handle(self, request: CompletionRequest) -> Completion:
        i = request.call_index
        self.report.calls.append(i)
        stopped = self.report.divergence is not None and self.on_divergence == "stop"
        if stopped:  # the harness retrying the refused call: every later call fails the same way
            raise PolicyBackendError(self._stop_message())
        if self._live or i >= self.report.branch_at:
            return await self._hand_over(request)
        rec = self.recorded[i]
        div = _first_difference(rec, request)
        if div is not None:
            self.report.divergence = div
            if self.on_divergence == "stop":
                raise PolicyBackendError(self._stop_message())
            return await self._hand_over(request)
        self.report.replayed += 1
        if request.prompt_ids is not None and request.prompt_ids == rec.prompt_ids:
            self.report.prompt_ids_equal += 1
        if rec.completion_ids is None:  # a message-level recording: replay the turn it answered
            return Completion(
                completion_ids=None,
                logprobs=None,
                text=rec.completion_text,
                structured=dict(rec.response or {}),
                finish_reason=rec.finish_reason or "stop",
                policy_version=rec.policy_version,
                token_source=rec.token_source,
                meta={"replayed_from": rec.session_id},
            )
        return Completion(
            completion_ids=list(rec.completion_ids),
            logprobs=list(rec.logprobs) if rec.logprobs is not None else None,
            text=rec.completion_text,
            finish_reason=rec.finish_reason or "stop",
            policy_version=rec.policy_version,
            token_source="replayed",
            meta={"replayed_from": rec.session_id},
        )

    def _stop_message(self) -> str:
        d = self.report.divergence
        assert d is not None
        return f"replay diverged at call {d.call_index}, message {d.message_index}: recorded {d.recorded!r}, got {d.got!r}"

    async def _hand_over(self, request: CompletionRequest) -> Completion:
        first = not self._live
        self._live = True
        if first:
            self.report.handed_over_at = request.call_index
        c = await self.policy.handle(request)
        if first:
            c.meta = {**c.meta, "branch_at": request.call_index, "branch_of": self.recorded[0].session_id if self.recorded else ""}
        return c

    async def aclose(self) -> None:
        """The wrapped policy is shared with other episodes: it is not closed here."""


def _first_difference(rec: CallRecord, request: CompletionRequest) -> Divergence | None:
    want = normalise_request(rec.messages or [], rec.tools or [])
    got = normalise_request(request.messages, request.tools)
    if want[0] != got[0]:
        return Divergence(request.call_index, -1, want[0], got[0])
    for j in range(1, max(len(want), len(got))):
        a = want[j] if j < len(want) else None
        b = got[j] if j < len(got) else None
        if a != b:
            return Divergence(request.call_index, j - 1, a, b)
    return None
