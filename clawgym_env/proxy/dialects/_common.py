"""What the dialect modules share: the parsed request and its common tail, the reply to render, SSE framing."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from clawgym_env.capture.delta import PromptHint

__all__ = ["BadRequest", "ParsedRequest", "Reply", "dumps", "function_tool", "guarded", "parsed_request", "sse"]

F = TypeVar("F", bound=Callable[..., Any])


class BadRequest(ValueError):
    """A request body the dialect cannot accept; becomes a 400 in the dialect's error shape."""


@dataclass
class ParsedRequest:
    """A harness request in neutral form plus the sampling knobs it asked for."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    model: str = ""
    stream: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    include_usage: bool = False
    """OpenAI Chat ``stream_options.include_usage``."""
    messages_json: list[orjson.Fragment] | None = None
    tools_json: orjson.Fragment | None = None
    """``messages`` (one fragment per message) and ``tools`` as the capture encodes them, once the session has
    shared them with its last call (``SharedHistory``)."""
    json_size: int = 0
    """Bytes of both encoded, once shared."""
    prompt_hint: PromptHint | None = None
    """Where the prompt builder took the prompt's first ids from (the capture line stores the rest)."""


@dataclass
class Reply:
    """The assistant turn to send back, already neutral (tool-call ids issued by the session)."""

    message: dict[str, Any]
    finish_reason: str
    """Neutral: "stop", "length", "tool_calls" or "stop_sequence"."""
    model: str
    prompt_tokens: int
    completion_tokens: int
    response_id: str
    created: int = 0
    stop_sequence: str | None = None


def function_tool(name: Any, description: Any, parameters: Any) -> dict[str, Any]:
    """A neutral function tool; ``description`` is left out when empty."""
    fn: dict[str, Any] = {"name": name}
    if description:
        fn["description"] = description
    fn["parameters"] = parameters
    return {"type": "function", "function": fn}


def parsed_request(
    body: dict[str, Any],
    messages: list[dict[str, Any]],
    parse_tool: Callable[[dict[str, Any]], dict[str, Any] | None],
    max_tokens: Any,
    max_tokens_field: str,
    **extra: Any,
) -> ParsedRequest:
    """The tail every ``parse_request`` shares: ``body["tools"]`` through ``parse_tool`` (dropping what it
    returns None for), ``max_tokens`` checked as an integer (the error names ``max_tokens_field``), then the
    model, stream and sampling knobs; ``extra`` sets the other ``ParsedRequest`` fields."""
    tools = [t for t in (parse_tool(t) for t in body.get("tools") or () if isinstance(t, dict)) if t]
    if max_tokens is not None and not isinstance(max_tokens, int):
        raise BadRequest(f"{max_tokens_field}: expected an integer")
    return ParsedRequest(
        messages=messages,
        tools=tools,
        model=str(body.get("model", "")),
        stream=bool(body.get("stream", False)),
        max_tokens=max_tokens,
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        **extra,
    )


def guarded(parse: F) -> F:
    """Turn any surprise in a request's shape (a bool where a list belongs...) into a BadRequest."""

    @functools.wraps(parse)
    def wrapper(body: dict[str, Any], ids: Any) -> ParsedRequest:
        try:
            parsed = parse(body, ids)
        except BadRequest:
            raise
        except (TypeError, AttributeError, KeyError, ValueError, IndexError) as exc:
            raise BadRequest(
                f"request body has an unexpected shape ({type(exc).__name__}: {exc}); check it against the API reference"
            ) from None
        for name, value in (("temperature", parsed.temperature), ("top_p", parsed.top_p)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise BadRequest(f"{name}: expected a number, got {value!r}")
        if parsed.max_tokens is not None and (isinstance(parsed.max_tokens, bool) or parsed.max_tokens < 1):
            raise BadRequest(f"max_tokens: expected a positive integer, got {parsed.max_tokens!r}")
        if parsed.seed is not None and (
            isinstance(parsed.seed, bool) or not isinstance(parsed.seed, int) or not -(1 << 63) <= parsed.seed < 1 << 63
        ):
            raise BadRequest(f"seed: expected a 64-bit integer, got {parsed.seed!r}")
        parsed.stop = [str(x) for x in parsed.stop]
        return parsed

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event frame."""
    head = b"event: " + event.encode() + b"\ndata: " if event else b"data: "
    return head + orjson.dumps(data) + b"\n\n"


def args_json(arguments: Any) -> str:
    """Tool-call arguments as the JSON string OpenAI wire formats carry."""
    if isinstance(arguments, str):
        return arguments
    return orjson.dumps(arguments).decode()
