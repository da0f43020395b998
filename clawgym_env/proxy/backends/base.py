"""The policy-backend contract, shaped like an httpx transport: one async method plus aclose().

The proxy owns the prompt tokens (it renders the chat template and splices exact ids), so a
token backend receives ``prompt_ids`` and must return the sampled ``completion_ids`` with their
``logprobs``. Message-level backends (API passthrough, scripted) set ``TOKEN_LEVEL = False``,
read ``messages``/``tools`` instead and return text; their captures are marked evaluation-only.

Streaming: a ``StreamingBackend`` also yields the completion while it is decoded, as
``CompletionDelta`` items followed by the ``Completion`` itself (whose ids, logprobs and text are
the deltas' joined), so the proxy can forward text to the harness as it comes and still capture
exactly what a non-streamed call captures. Backends that cannot stream implement ``handle`` only.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from clawgym_env.capture.routing import RoutedExperts
from clawgym_env.errors import PolicyBackendError

__all__ = ["Completion", "CompletionDelta", "CompletionRequest", "PolicyBackend", "StreamingBackend", "WeightUpdate", "deliver"]

WeightUpdate = Literal["none", "fixed", "copy", "reload"]
"""How a backend takes new policy weights in training: "copy" (``update_weights``: a state dict, in this process
or its child), "reload" (``reload_weights``: a saved folder a server reads), "fixed" (a policy that never changes,
such as a script: training runs, nothing moves), "none" (a model it cannot train: an API)."""


@dataclass
class CompletionRequest:
    """One model call as the backend sees it."""

    session_id: str
    call_index: int
    prompt_ids: list[int] | None
    """Exact prompt token ids (token-level backends)."""
    messages: list[dict[str, Any]]
    """Neutral (HF chat-template shaped) messages: OpenAI-style tool_calls, role "tool"."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """Neutral tools: [{"type": "function", "function": {"name", "description", "parameters"}}]."""
    max_tokens: int = 1024
    temperature: float = 1.0
    top_p: float = 1.0
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    dialect: str = "openai-chat"
    """Which API the harness spoke: "anthropic", "openai-chat", "openai-responses" or "gemini"."""
    raw: dict[str, Any] | None = None
    """The harness's request body as received (for passthrough and scripted matching)."""


@dataclass
class Completion:
    """What the policy produced for one call."""

    completion_ids: list[int] | None
    """Sampled token ids; None for message-level backends."""
    logprobs: list[float] | None
    """Log-probability of each sampled id under the sampling policy."""
    text: str | None = None
    """Decoded text; required for message-level backends."""
    finish_reason: str = "stop"
    """"stop" (EOS or stop string), "length", or "error"."""
    policy_version: int | None = None
    structured: dict[str, Any] | None = None
    """Message-level backends may return an already-structured assistant message
    ({"content", "tool_calls", "reasoning_content"}) instead of raw text."""
    usage: dict[str, int] = field(default_factory=dict)
    token_source: str | None = None
    """"sampled", "tokenized" (ids made by tokenizing text, e.g. scripted), "replayed" (a recorded call's ids) or "none"; None lets the
    proxy decide ("sampled" when completion_ids are given, else "none")."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Merged into the call's ``CallRecord.meta`` (e.g. a replayed call's source, a branch point)."""
    routing: RoutedExperts | None = None
    """A mixture-of-experts backend's routed experts of every token it forwarded for this call (``CallRecord.routing``)."""


@dataclass
class CompletionDelta:
    """The tokens sampled since the previous delta of a streamed call, and the text they settled."""

    completion_ids: list[int]
    logprobs: list[float]
    text: str
    """Text now certain (no stop string or unfinished character can change it); may be empty."""


class PolicyBackend(abc.ABC):
    """Answers model calls. Subclasses implement ``handle``; ``aclose`` frees resources."""

    TOKEN_LEVEL: ClassVar[bool] = True
    """True if the backend consumes prompt ids and returns completion ids + logprobs."""
    WEIGHT_UPDATE: ClassVar[WeightUpdate] = "none"
    """How new policy weights reach it during training (``WeightUpdate``); the trainer picks its sync from this."""

    name: str = "base"

    @abc.abstractmethod
    async def handle(self, request: CompletionRequest) -> Completion:
        """Answer one call."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Free resources; idempotent."""

    def update_weights(self, state: Mapping[str, Any], version: int) -> None:
        """Load a new state dict (``WEIGHT_UPDATE == "copy"``); calls answered afterwards carry ``version``."""
        raise PolicyBackendError(f"{type(self).__name__} takes no state dict (its weight update is {self.WEIGHT_UPDATE!r})")

    async def reload_weights(self, path: str | Path, version: int) -> None:
        """Reload the policy from a saved folder (``WEIGHT_UPDATE == "reload"``); later calls carry ``version``."""
        raise PolicyBackendError(f"{type(self).__name__} reloads no folder (its weight update is {self.WEIGHT_UPDATE!r})")

    @property
    def tokenizer(self) -> Any | None:
        """The HF tokenizer whose chat template renders prompts (token-level backends)."""
        return None

    @property
    def model_name(self) -> str:
        return self.name


class StreamingBackend(PolicyBackend):
    """A backend that can hand out a completion while decoding it."""

    @abc.abstractmethod
    def stream(self, request: CompletionRequest) -> AsyncIterator[CompletionDelta | Completion]:
        """Yield deltas as tokens are decoded, then the whole ``Completion`` (last item).

        Closing the iterator early abandons the call (decoding stops for it).
        """


def deliver(future: asyncio.Future[Completion], result: Completion | BaseException) -> None:
    """Resolve ``future`` (on its own loop) unless its caller gave up: backends that decode in a
    thread or another process hand results back this way."""
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)
