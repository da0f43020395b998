"""One captured model call: the unit everything downstream (trees, trainers, reports) reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, cast

import orjson
from pydantic import BaseModel, ConfigDict, Field

from clawgym_env.capture.routing import RoutedExperts

__all__ = ["JSON_OPTIONS", "CallRecord", "TokenSource"]

JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
"""How a capture line is encoded; a value spliced into a line as ``orjson.Fragment`` must be encoded so too."""

TokenSource = Literal["sampled", "tokenized", "replayed", "none"]
"""``replayed``: a recorded call's ids answered again (``ReplayBackend``): context in a tree, never trained twice."""


class CallRecord(BaseModel):
    """A model call as the proxy saw and answered it; one JSONL line in the episode's capture."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(description="Episode (proxy session) the call belongs to.")
    call_index: int = Field(description="0-based order of arrival within the session.")
    dialect: str = Field(description='"anthropic", "openai-chat", "openai-responses", "gemini" ("egress": a refused network attempt).')
    path: str = Field(default="", description="HTTP path the harness called.")
    stream: bool = Field(default=False, description="Whether the harness asked for SSE.")
    model: str = Field(default="", description="Model name the harness asked for.")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="Normalised neutral messages.")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="Normalised neutral tools.")
    prompt_ids: list[int] | None = Field(default=None, description="Exact prompt ids sent to the policy.")
    completion_ids: list[int] | None = Field(default=None, description="Exact sampled ids.")
    logprobs: list[float] | None = Field(default=None, description="Rollout logprob of each completion id.")
    routing: RoutedExperts | None = Field(
        default=None,
        description="Experts a mixture-of-experts engine routed each forwarded token to (capture/routing.py); None for dense models.",
    )
    completion_text: str = Field(default="", description="Decoded completion.")
    response: dict[str, Any] | None = Field(default=None, description="Parsed assistant message returned.")
    finish_reason: str = Field(default="stop", description='"stop", "length", "tool_calls" or "error".')
    token_source: TokenSource = Field(default="sampled", description="Where completion ids came from.")
    reused_prompt_tokens: int = Field(default=0, description="Prompt ids spliced from earlier calls (TITO hits).")
    policy_version: int | None = Field(default=None, description="Weights version that sampled the call.")
    started_at: float = Field(default=0.0, description="Unix time the request arrived.")
    latency_s: float = Field(default=0.0, description="Arrival to last byte sent.")
    backend_s: float = Field(default=0.0, description="Time spent inside the policy backend.")
    status: int = Field(default=200, description="HTTP status returned to the harness.")
    error: str | None = Field(default=None, description="Error returned instead of a completion.")
    meta: dict[str, Any] = Field(default_factory=dict, description="Branch hints etc. (e.g. subagent, compaction).")

    @classmethod
    def trusted(cls, values: dict[str, Any]) -> CallRecord:
        """``model_construct(**values)`` for the proxy's own records (one per call on its hot path), at a third of
        its cost: no validation, defaults filled in field order, ``model_fields_set`` the given keys. CallRecord has
        no aliases, private attributes or post-init, which is what lets pydantic's per-field walk be skipped
        (tests/clawgym_env/capture/test_records.py holds it to model_construct)."""
        data = _PLAIN.copy()  # every field in field order: update() keeps that order
        data.update(values)
        if len(data) != len(_PLAIN):  # keys that are no field: dropped, as model_construct drops them
            for name in values.keys() - _NAMES:
                del data[name]
        for name, factory in _FACTORIES:
            if name not in values:
                data[name] = factory()
        record = cls.__new__(cls)
        _set(record, "__dict__", data)
        _set(record, "__pydantic_fields_set__", values.keys() & _NAMES)  # a set: model_copy updates it
        _set(record, "__pydantic_extra__", None)
        _set(record, "__pydantic_private__", None)
        return record


_set = object.__setattr__
_PLAIN = {name: None if f.default_factory is not None else f.default for name, f in CallRecord.model_fields.items()}
_FACTORIES = tuple(
    (name, cast(Callable[[], Any], f.default_factory))  # CallRecord's factories take no data
    for name, f in CallRecord.model_fields.items()
    if f.default_factory is not None
)
_NAMES = frozenset(CallRecord.model_fields)
