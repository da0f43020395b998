"""Anthropic Messages (``/v1/messages``, ``/v1/messages/count_tokens``) <-> neutral form.

Accepts what Claude Code sends: ``?beta=true``, ``role: "system"`` inside ``messages``,
top-level ``system`` as str or blocks, ``cache_control`` anywhere, thinking blocks.
Streams the exact event order the SDK's accumulator expects.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from clawgym_env.proxy._asgi import KEEPALIVE
from clawgym_env.proxy._neutral import ToolIdMap, text_of
from clawgym_env.proxy.dialects._common import (
    BadRequest,
    ParsedRequest,
    Reply,
    args_json,
    function_tool,
    guarded,
    parsed_request,
    sse,
)

__all__ = [
    "KEEPALIVE",
    "NAME",
    "RESPONSE_ID_PREFIX",
    "TOOL_ID_PREFIX",
    "LiveReply",
    "error_body",
    "parse_request",
    "render_response",
    "render_stream",
    "stream_error",
]

NAME = "anthropic"
KEEPALIVE = KEEPALIVE
TOOL_ID_PREFIX = "toolu_"
RESPONSE_ID_PREFIX = "msg_"

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "stop_sequence": "stop_sequence"}


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message}}


def _tool(t: dict[str, Any]) -> dict[str, Any] | None:
    if "input_schema" not in t:  # server tools (web_search_…): the policy cannot call them
        return None
    return function_tool(t["name"], t.get("description"), t["input_schema"])


def _user_blocks(blocks: list[Any], ids: ToolIdMap, out: list[dict[str, Any]]) -> None:
    """A user turn: each tool_result becomes a role "tool" message, the rest one user message."""
    texts: list[Any] = []
    for b in blocks:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            if texts:
                out.append({"role": "user", "content": text_of(texts)})
                texts = []
            content = text_of(b.get("content"))
            out.append({"role": "tool", "tool_call_id": ids.canonical(b.get("tool_use_id")), "content": content})
        else:
            texts.append(b)
    if texts:
        out.append({"role": "user", "content": text_of(texts)})


def _assistant_blocks(blocks: list[Any], ids: ToolIdMap) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for b in blocks:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text":
            texts.append(b.get("text", ""))
        elif kind == "thinking":
            reasoning.append(b.get("thinking", ""))
        elif kind in ("tool_use", "server_tool_use"):
            fn = {"name": b.get("name", ""), "arguments": b.get("input") or {}}
            calls.append({"id": ids.canonical(b.get("id")), "type": "function", "function": fn})
    msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
    if reasoning:
        msg["reasoning_content"] = "\n".join(reasoning)
    if calls:
        msg["tool_calls"] = calls
    return msg


@guarded
def parse_request(body: dict[str, Any], ids: ToolIdMap) -> ParsedRequest:
    """Anthropic Messages body -> neutral messages and tools."""
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list):
        raise BadRequest("messages: field required (a list of {role, content})")
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        out.append({"role": "system", "content": text_of(system)})
    for i, m in enumerate(raw_messages):
        if not isinstance(m, dict) or "role" not in m:
            raise BadRequest(f"messages.{i}: expected an object with role and content")
        role, content = m["role"], m.get("content")
        if role == "system":
            text = text_of(content)
            if out and out[-1]["role"] == "system" and len(out) == 1:
                out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + text}
            else:
                out.append({"role": "system", "content": text})
        elif role == "user":
            if isinstance(content, list):
                _user_blocks(content, ids, out)
            else:
                out.append({"role": "user", "content": text_of(content)})
        elif role == "assistant":
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            out.append(_assistant_blocks(blocks, ids))
        else:
            raise BadRequest(f"messages.{i}.role: {role!r} is not one of user, assistant, system")
    parsed = parsed_request(body, out, _tool, body.get("max_tokens"), "max_tokens")
    stop = body.get("stop_sequences") or []
    parsed.stop = list(stop) if isinstance(stop, list) else [str(stop)]
    return parsed


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        blocks.append({"type": "thinking", "thinking": message["reasoning_content"], "signature": ""})
    if message.get("content") or not message.get("tool_calls"):
        blocks.append({"type": "text", "text": message.get("content") or ""})
    for c in message.get("tool_calls") or ():
        args = c["function"]["arguments"]
        blocks.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": args if isinstance(args, dict) else {}})
    return blocks


def _usage(reply: Reply, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": reply.prompt_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def render_response(reply: Reply) -> dict[str, Any]:
    """Non-streaming Messages response."""
    return {
        "id": reply.response_id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": _blocks(reply.message),
        "stop_reason": _STOP.get(reply.finish_reason, "end_turn"),
        "stop_sequence": reply.stop_sequence,
        "usage": _usage(reply, reply.completion_tokens),
    }


@functools.lru_cache(maxsize=64)
def _constant(kind: str, i: int = 0) -> bytes:
    """The frames that never vary but by block index, rendered once."""
    if kind == "text_start":
        return sse({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}, "content_block_start")
    if kind == "content_block_stop":
        return sse({"type": "content_block_stop", "index": i}, "content_block_stop")
    return sse({"type": kind}, kind)  # ping, message_stop


def _block_frames(i: int, b: dict[str, Any]) -> Iterator[bytes]:
    kind = b["type"]
    if kind == "text":
        yield _constant("text_start", i)
        if b["text"]:
            yield sse(
                {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}, "content_block_delta"
            )
    elif kind == "thinking":
        yield sse(
            {"type": "content_block_start", "index": i, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
            "content_block_start",
        )
        yield sse(
            {"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": b["thinking"]}},
            "content_block_delta",
        )
        yield sse({"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta", "signature": ""}}, "content_block_delta")
    else:
        head = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
        yield sse({"type": "content_block_start", "index": i, "content_block": head}, "content_block_start")
        yield sse(
            {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": args_json(b["input"])}},
            "content_block_delta",
        )
    yield _constant("content_block_stop", i)


def _start(reply: Reply) -> bytes:
    start: dict[str, Any] = {
        "id": reply.response_id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage(reply, 1),
    }
    return sse({"type": "message_start", "message": start}, "message_start") + _constant("ping")


def _end(reply: Reply) -> bytes:
    delta = {"stop_reason": _STOP.get(reply.finish_reason, "end_turn"), "stop_sequence": reply.stop_sequence}
    return sse({"type": "message_delta", "delta": delta, "usage": _usage(reply, reply.completion_tokens)}, "message_delta") + _constant(
        "message_stop"
    )


def render_stream(reply: Reply, include_usage: bool = False) -> Iterator[bytes]:
    """SSE frames: message_start, ping, per-block start/delta/stop, message_delta, message_stop."""
    yield _start(reply)
    for i, b in enumerate(_blocks(reply.message)):
        yield from _block_frames(i, b)
    yield _end(reply)


class LiveReply:
    """A stream sent while the policy decodes: text block 0 grows with each delta; the rest comes at the end."""

    def __init__(self, head: Reply, include_usage: bool = False) -> None:
        self.head = head

    def start(self) -> bytes:
        return _start(self.head) + next(_block_frames(0, {"type": "text", "text": ""}))

    def text(self, text: str) -> bytes:
        return sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}, "content_block_delta")

    def finish(self, reply: Reply, sent: str) -> bytes:
        """What is left once ``reply`` is known, ``sent`` (a prefix of its content) having gone out already."""
        rest = (reply.message.get("content") or "")[len(sent) :]
        frames = [self.text(rest)] if rest else []
        frames.append(_constant("content_block_stop"))
        others = [b for b in _blocks(reply.message) if b["type"] != "text"]
        frames += [f for i, b in enumerate(others, 1) for f in _block_frames(i, b)]
        return b"".join(frames) + _end(reply)


def stream_error(status: int, message: str) -> bytes:
    """An error event sent after the stream has started."""
    return sse(error_body(status, message), "error")
