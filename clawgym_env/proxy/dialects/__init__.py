"""One module per wire API, each a ``Dialect``: it parses the harness's requests into the neutral form and renders
replies (whole, streamed, live while decoding, and errors) in that API's own shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from clawgym_env.proxy._neutral import ToolIdMap
from clawgym_env.proxy.dialects import anthropic, gemini, openai_chat, openai_responses
from clawgym_env.proxy.dialects._common import ParsedRequest, Reply

__all__ = ["DIALECTS", "Dialect", "LiveStream", "anthropic", "gemini", "openai_chat", "openai_responses"]


class LiveStream(Protocol):
    """A streamed reply sent while the policy decodes: its opening frames, each settled piece of text, the end."""

    def start(self) -> bytes: ...

    def text(self, text: str) -> bytes: ...

    def finish(self, reply: Reply, sent: str) -> bytes: ...


class Dialect(Protocol):
    """What the proxy reads from a wire API's module (each module below is one; mypy checks them against this)."""

    NAME: str
    """The API's name in captures: "anthropic", "openai-chat", "openai-responses", "gemini"."""
    TOOL_ID_PREFIX: str
    """How the API's tool-call ids start ("toolu_", "call_")."""
    RESPONSE_ID_PREFIX: str
    KEEPALIVE: bytes
    """What keeps an SSE stream of this API open while a slow policy thinks (a comment, or a blank line)."""

    def parse_request(self, body: dict[str, Any], ids: ToolIdMap) -> ParsedRequest:
        """The neutral request; ``BadRequest`` (a 400 in the API's shape) for a body of the wrong shape."""
        ...

    def render_response(self, reply: Reply) -> dict[str, Any]: ...

    def render_stream(self, reply: Reply, include_usage: bool = False) -> Iterator[bytes]:
        """The whole reply as SSE frames (``include_usage``: OpenAI Chat's stream option; others ignore it)."""
        ...

    def LiveReply(self, head: Reply, include_usage: bool = False) -> LiveStream: ...  # a class in each module

    def stream_error(self, status: int, message: str) -> bytes: ...

    def error_body(self, status: int, message: str) -> dict[str, Any]: ...


DIALECTS: dict[str, Dialect] = {m.NAME: m for m in (anthropic, gemini, openai_chat, openai_responses)}
