"""OpenAI Responses (``/v1/responses``) <-> neutral form, with its typed SSE events.

Input items (messages, function_call, function_call_output, reasoning) fold into neutral
messages: function calls join the preceding assistant turn, reasoning joins the next one.
"""

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
from clawgym_env.proxy.dialects.openai_chat import error_body

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

NAME = "openai-responses"
KEEPALIVE = KEEPALIVE
TOOL_ID_PREFIX = "call_"
RESPONSE_ID_PREFIX = "resp_"


def _tool(t: dict[str, Any]) -> dict[str, Any] | None:
    if t.get("type") != "function" or "name" not in t:
        return None
    return function_tool(t["name"], t.get("description"), t.get("parameters") or {"type": "object", "properties": {}})


@guarded
def parse_request(body: dict[str, Any], ids: ToolIdMap) -> ParsedRequest:
    """Responses body -> neutral messages and tools."""
    if body.get("previous_response_id"):
        raise BadRequest(
            "previous_response_id is not supported: the proxy keeps no response store; send the whole conversation in `input` (store=false)"
        )
    raw = body.get("input")
    if raw is None:
        raise BadRequest("input: field required (a string or a list of items)")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise BadRequest("input: expected a string or a list of items")
    out: list[dict[str, Any]] = []
    if body.get("instructions"):
        out.append({"role": "system", "content": text_of(body["instructions"])})
    pending_reasoning: list[str] = []

    def open_assistant() -> dict[str, Any]:
        if out and out[-1]["role"] == "assistant" and not pending_reasoning:
            return out[-1]
        msg: dict[str, Any] = {"role": "assistant", "content": ""}
        if pending_reasoning:
            msg["reasoning_content"] = "\n".join(pending_reasoning)
            pending_reasoning.clear()
        out.append(msg)
        return msg

    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise BadRequest(f"input.{i}: expected an object")
        kind = it.get("type", "message")
        if kind == "message":
            role = it.get("role")
            if role in ("system", "developer"):
                out.append({"role": "system", "content": text_of(it.get("content"))})
            elif role == "user":
                out.append({"role": "user", "content": text_of(it.get("content"))})
            elif role == "assistant":
                if pending_reasoning:
                    msg = open_assistant()
                else:
                    msg = {"role": "assistant", "content": ""}
                    out.append(msg)
                msg["content"] = (msg["content"] + "\n" if msg["content"] else "") + text_of(it.get("content"))
            else:
                raise BadRequest(f"input.{i}.role: {role!r} is not one of system, developer, user, assistant")
        elif kind == "function_call":
            msg = open_assistant()
            msg.setdefault("tool_calls", []).append(
                {
                    "id": ids.canonical(it.get("call_id")),
                    "type": "function",
                    "function": {"name": it.get("name", ""), "arguments": parse_arguments(it.get("arguments"))},
                }
            )
        elif kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": ids.canonical(it.get("call_id")), "content": text_of(it.get("output"))})
        elif kind == "reasoning":
            summary = "\n".join(s.get("text", "") for s in it.get("summary") or () if isinstance(s, dict))
            content = "\n".join(s.get("text", "") for s in it.get("content") or () if isinstance(s, dict))
            if summary or content:
                pending_reasoning.append(content or summary)
        # other item types (item_reference, web_search_call, ...) carry nothing the policy can use
    return parsed_request(body, out, _tool, body.get("max_output_tokens"), "max_output_tokens")


def _items(reply: Reply) -> list[dict[str, Any]]:
    m = reply.message
    rid = reply.response_id.removeprefix("resp_")
    items: list[dict[str, Any]] = []
    if m.get("reasoning_content"):
        items.append(
            {
                "type": "reasoning",
                "id": f"rs_{rid}",
                "status": "completed",
                "summary": [{"type": "summary_text", "text": m["reasoning_content"]}],
            }
        )
    if m.get("content") or not m.get("tool_calls"):
        items.append(
            {
                "type": "message",
                "id": f"msg_{rid}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": m.get("content") or "", "annotations": [], "logprobs": []}],
            }
        )
    for c in m.get("tool_calls") or ():
        items.append(
            {
                "type": "function_call",
                "id": "fc_" + c["id"].removeprefix("call_"),
                "call_id": c["id"],
                "name": c["function"]["name"],
                "arguments": args_json(c["function"]["arguments"]),
                "status": "completed",
            }
        )
    return items


def _response(reply: Reply, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    done = status == "completed"
    incomplete = reply.finish_reason == "length" and done
    return {
        "id": reply.response_id,
        "object": "response",
        "created_at": reply.created,
        "status": "incomplete" if incomplete else status,
        "model": reply.model,
        "output": output,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "temperature": None,
        "top_p": None,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": {
            "input_tokens": reply.prompt_tokens,
            "output_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        if done
        else None,
    }


def render_response(reply: Reply) -> dict[str, Any]:
    """Non-streaming response object."""
    return _response(reply, "completed", _items(reply))


class _Events:
    """Responses stream events, numbered in order."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, kind: str, payload: dict[str, Any]) -> bytes:
        frame = sse({"type": kind, "sequence_number": self.seq, **payload}, kind)
        self.seq += 1
        return frame

    def message_open(self, idx: int, item: dict[str, Any]) -> Iterator[bytes]:
        yield self("response.output_item.added", {"output_index": idx, "item": {**item, "status": "in_progress", "content": []}})
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        yield self("response.content_part.added", {"item_id": item["id"], "output_index": idx, "content_index": 0, "part": part})

    def text(self, idx: int, item_id: str, text: str) -> bytes:
        return self(
            "response.output_text.delta", {"item_id": item_id, "output_index": idx, "content_index": 0, "delta": text, "logprobs": []}
        )

    def item(self, idx: int, item: dict[str, Any], opened: bool = False) -> Iterator[bytes]:
        """An output item's frames (a message already opened and streamed: only its closing frames)."""
        kind = item["type"]
        if kind == "message":
            text = item["content"][0]["text"]
            base = {"item_id": item["id"], "output_index": idx, "content_index": 0}
            if not opened:
                yield from self.message_open(idx, item)
                if text:
                    yield self.text(idx, item["id"], text)
            yield self("response.output_text.done", {**base, "text": text, "logprobs": []})
            yield self("response.content_part.done", {**base, "part": item["content"][0]})
        elif kind == "function_call":
            yield self("response.output_item.added", {"output_index": idx, "item": {**item, "status": "in_progress", "arguments": ""}})
            base = {"item_id": item["id"], "output_index": idx}
            yield self("response.function_call_arguments.delta", {**base, "delta": item["arguments"]})
            yield self("response.function_call_arguments.done", {**base, "name": item["name"], "arguments": item["arguments"]})
        else:  # reasoning
            text = item["summary"][0]["text"]
            yield self("response.output_item.added", {"output_index": idx, "item": {**item, "summary": []}})
            base = {"item_id": item["id"], "output_index": idx, "summary_index": 0}
            yield self("response.reasoning_summary_part.added", {**base, "part": {"type": "summary_text", "text": ""}})
            yield self("response.reasoning_summary_text.delta", {**base, "delta": text})
            yield self("response.reasoning_summary_text.done", {**base, "text": text})
            yield self("response.reasoning_summary_part.done", {**base, "part": item["summary"][0]})
        yield self("response.output_item.done", {"output_index": idx, "item": item})

    def start(self, reply: Reply) -> Iterator[bytes]:
        yield self("response.created", {"response": _response(reply, "in_progress", [])})
        yield self("response.in_progress", {"response": _response(reply, "in_progress", [])})


def render_stream(reply: Reply, include_usage: bool = False) -> Iterator[bytes]:
    """response.created … output_item.added/deltas/done … response.completed."""
    ev = _Events()
    yield from ev.start(reply)
    items = _items(reply)
    for idx, item in enumerate(items):
        yield from ev.item(idx, item)
    yield ev("response.completed", {"response": _response(reply, "completed", items)})


class LiveReply:
    """A stream sent while the policy decodes: the message item (output 0) grows; other items come at the end."""

    def __init__(self, head: Reply, include_usage: bool = False) -> None:
        self.head, self.ev = head, _Events()
        self.item_id = "msg_" + head.response_id.removeprefix("resp_")

    def start(self) -> bytes:
        item = {"type": "message", "id": self.item_id, "status": "in_progress", "role": "assistant", "content": []}
        return b"".join([*self.ev.start(self.head), *self.ev.message_open(0, item)])

    def text(self, text: str) -> bytes:
        return self.ev.text(0, self.item_id, text)

    def finish(self, reply: Reply, sent: str) -> bytes:
        """What is left once ``reply`` is known, ``sent`` (a prefix of its content) having gone out already."""
        items = _items(reply)
        message = next(i for i in items if i["type"] == "message")
        items = [message, *(i for i in items if i is not message)]
        rest = message["content"][0]["text"][len(sent) :]
        frames = [self.text(rest)] if rest else []
        frames += self.ev.item(0, message, opened=True)
        frames += [f for idx, item in enumerate(items[1:], 1) for f in self.ev.item(idx, item)]
        frames.append(self.ev("response.completed", {"response": _response(reply, "completed", items)}))
        return b"".join(frames)


def stream_error(status: int, message: str) -> bytes:
    body = error_body(status, message)["error"]
    return sse({"type": "error", "code": body["code"], "message": message, "param": None, "sequence_number": 0}, "error")
