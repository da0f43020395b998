"""OpenAI Chat Completions (``/v1/chat/completions``) <-> neutral form, with SSE chunks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clawgym_env.proxy._asgi import KEEPALIVE
from clawgym_env.proxy._neutral import ToolIdMap, parse_arguments, text_of
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

NAME = "openai-chat"
KEEPALIVE = KEEPALIVE
TOOL_ID_PREFIX = "call_"
RESPONSE_ID_PREFIX = "chatcmpl-"
DONE = b"data: [DONE]\n\n"

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    529: "server_error",
}
_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "stop_sequence": "stop"}


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}


def parse_tool(t: dict[str, Any]) -> dict[str, Any] | None:
    fn = t.get("function") if t.get("type", "function") == "function" else None
    if not isinstance(fn, dict) or "name" not in fn:
        return None
    return function_tool(fn["name"], fn.get("description"), fn.get("parameters") or {"type": "object", "properties": {}})


@guarded
def parse_request(body: dict[str, Any], ids: ToolIdMap) -> ParsedRequest:
    """Chat Completions body -> neutral messages and tools."""
    raw = body.get("messages")
    if not isinstance(raw, list):
        raise BadRequest("messages: field required (a list of {role, content})")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or "role" not in m:
            raise BadRequest(f"messages.{i}: expected an object with role and content")
        role = m["role"]
        if role in ("system", "developer"):
            out.append({"role": "system", "content": text_of(m.get("content"))})
        elif role == "user":
            out.append({"role": "user", "content": text_of(m.get("content"))})
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": ids.canonical(m.get("tool_call_id")), "content": text_of(m.get("content"))})
        elif role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": text_of(m.get("content"))}
            reasoning = m.get("reasoning_content") or m.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                msg["reasoning_content"] = reasoning
            calls = []
            for c in m.get("tool_calls") or ():
                fn = c.get("function") or {}
                calls.append(
                    {
                        "id": ids.canonical(c.get("id")),
                        "type": "function",
                        "function": {"name": fn.get("name", ""), "arguments": parse_arguments(fn.get("arguments"))},
                    }
                )
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
        else:
            raise BadRequest(f"messages.{i}.role: {role!r} is not one of system, developer, user, assistant, tool")
    opts = body.get("stream_options") or {}
    parsed = parsed_request(
        body,
        out,
        parse_tool,
        body.get("max_completion_tokens", body.get("max_tokens")),
        "max_tokens",
        seed=body.get("seed"),
        include_usage=bool(isinstance(opts, dict) and opts.get("include_usage")),
    )
    stop = body.get("stop") or []
    parsed.stop = [stop] if isinstance(stop, str) else list(stop)
    return parsed


def _wire_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"id": c["id"], "type": "function", "function": {"name": c["function"]["name"], "arguments": args_json(c["function"]["arguments"])}}
        for c in message.get("tool_calls") or ()
    ]


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def render_response(reply: Reply) -> dict[str, Any]:
    """Non-streaming chat.completion object."""
    msg: dict[str, Any] = {"role": "assistant", "content": reply.message.get("content") or None}
    calls = _wire_calls(reply.message)
    if calls:
        msg["tool_calls"] = calls
    if reply.message.get("reasoning_content"):
        msg["reasoning_content"] = reply.message["reasoning_content"]
    if msg["content"] is None and not calls:
        msg["content"] = ""
    return {
        "id": reply.response_id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": _FINISH.get(reply.finish_reason, "stop")}],
        "usage": _usage(reply),
    }


def _chunk(reply: Reply, delta: dict[str, Any], finish: str | None = None) -> bytes:
    head = {"id": reply.response_id, "object": "chat.completion.chunk", "created": reply.created, "model": reply.model}
    return sse({**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})


def _tail(reply: Reply, include_usage: bool) -> Iterator[bytes]:
    """Tool-call heads + arguments, the finish chunk, usage, [DONE]."""
    for i, c in enumerate(_wire_calls(reply.message)):
        yield _chunk(
            reply,
            {"tool_calls": [{"index": i, "id": c["id"], "type": "function", "function": {"name": c["function"]["name"], "arguments": ""}}]},
        )
        yield _chunk(reply, {"tool_calls": [{"index": i, "function": {"arguments": c["function"]["arguments"]}}]})
    yield _chunk(reply, {}, _FINISH.get(reply.finish_reason, "stop"))
    if include_usage:
        yield sse(
            {
                "id": reply.response_id,
                "object": "chat.completion.chunk",
                "created": reply.created,
                "model": reply.model,
                "choices": [],
                "usage": _usage(reply),
            }
        )
    yield DONE


def render_stream(reply: Reply, include_usage: bool = False) -> Iterator[bytes]:
    """chat.completion.chunk frames: role, reasoning, content, tool-call head + arguments, finish, usage, [DONE]."""
    yield _chunk(reply, {"role": "assistant", "content": ""})
    if reply.message.get("reasoning_content"):
        yield _chunk(reply, {"reasoning_content": reply.message["reasoning_content"]})
    if reply.message.get("content"):
        yield _chunk(reply, {"content": reply.message["content"]})
    yield from _tail(reply, include_usage)


class LiveReply:
    """A stream sent while the policy decodes: content chunks as text settles; reasoning and tool calls at the end."""

    def __init__(self, head: Reply, include_usage: bool = False) -> None:
        self.head, self.include_usage = head, include_usage

    def start(self) -> bytes:
        return _chunk(self.head, {"role": "assistant", "content": ""})

    def text(self, text: str) -> bytes:
        return _chunk(self.head, {"content": text})

    def finish(self, reply: Reply, sent: str) -> bytes:
        """What is left once ``reply`` is known, ``sent`` (a prefix of its content) having gone out already."""
        rest = (reply.message.get("content") or "")[len(sent) :]
        frames = [self.text(rest)] if rest else []
        if reply.message.get("reasoning_content"):
            frames.append(_chunk(reply, {"reasoning_content": reply.message["reasoning_content"]}))
        return b"".join([*frames, *_tail(reply, self.include_usage)])


def stream_error(status: int, message: str) -> bytes:
    return sse(error_body(status, message))
